#ifndef NDSERVE_TESTS_UNIT_ENGINE_ENGINE_TEST_UTIL_H_
#define NDSERVE_TESTS_UNIT_ENGINE_ENGINE_TEST_UTIL_H_

// Shared helpers of the engine tests: where the fixtures are, the case.txt manifest
// (tests/fixture_case.h), requests built from it, and output comparison.

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "engine/graph.h"
#include "engine/inference_request.h"
#include "gtest/gtest.h"
#include "memory/dtype.h"
#include "tests/fixture_case.h"

namespace ndserve::engine::testing {

namespace fs = std::filesystem;

// The repository root: $NDSERVE_SOURCE_DIR (set by ctest), else the nearest ancestor of
// the test binary or the working directory that has tests/fixtures.
inline fs::path SourceDir() { return fixtures::SourceDir(); }

inline std::string ReadFileOrDie(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The recsys example is generated at build time (tools/gen_models.py), not committed.
inline fs::path RecsysModelPath() { return SourceDir() / "examples/models/recsys/1/model.onnx"; }
#define NDSERVE_REQUIRE_RECSYS()                                                             \
  do {                                                                                       \
    std::error_code ec_;                                                                     \
    ASSERT_TRUE(std::filesystem::exists(::ndserve::engine::testing::RecsysModelPath(), ec_)) \
        << ::ndserve::engine::testing::RecsysModelPath()                                     \
        << " is missing: generate it with /usr/bin/python3 tools/gen_models.py";             \
  } while (false)

// The case.txt manifest, read by the one parser every test binary shares.
using CaseTensor = fixtures::FixtureTensor;
using Case = fixtures::FixtureCase;

// The case in `dir`; a manifest that does not read is a test failure (and an empty case).
inline Case ReadCase(const fs::path& dir) {
  absl::StatusOr<Case> c = fixtures::ReadFixtureCase(dir);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : Case{};
}

// The case directories under `root` (those holding a case.txt), sorted.
inline std::vector<std::string> CaseNames(const fs::path& root) {
  return fixtures::FixtureCaseNames(root);
}

// A request feeding every graph input of `c` (views over the case's bytes).
inline InferenceRequest MakeRequest(const Case& c, const std::string& model_name = "") {
  InferenceRequest r;
  r.model_name = model_name;
  for (const CaseTensor* t : c.GraphInputs()) {
    r.inputs.push_back({t->name, t->dtype, t->dims, absl::MakeConstSpan(t->bytes)});
  }
  return r;
}

inline double ElementAsDouble(DType dtype, const uint8_t* p) {
  switch (dtype) {
    case DType::kFp32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::kFp64: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case DType::kFp16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      const int sign = h >> 15, exp = (h >> 10) & 0x1f, frac = h & 0x3ff;
      double v = exp == 0    ? std::ldexp(frac, -24)
                 : exp == 31 ? (frac ? NAN : INFINITY)
                             : std::ldexp(1024 + frac, exp - 25);
      return sign ? -v : v;
    }
    default:
      return 0;
  }
}

// Floating outputs: |got - want| <= atol + rtol * |want| (NaN matches NaN, infinities
// must be equal). Everything else: bytes equal.
inline ::testing::AssertionResult OutputMatches(const InferOutputTensor& got,
                                                const CaseTensor& want, double atol, double rtol) {
  if (got.dtype != want.dtype) {
    return ::testing::AssertionFailure()
           << want.name << ": dtype " << DTypeName(got.dtype) << ", want " << DTypeName(want.dtype);
  }
  if (got.shape != want.dims) {
    return ::testing::AssertionFailure() << want.name << ": shape mismatch";
  }
  if (got.data.size() != want.bytes.size()) {
    return ::testing::AssertionFailure()
           << want.name << ": " << got.data.size() << " bytes, want " << want.bytes.size();
  }
  const bool floating =
      want.dtype == DType::kFp32 || want.dtype == DType::kFp64 || want.dtype == DType::kFp16;
  if (got.data.empty() || std::memcmp(got.data.data(), want.bytes.data(), got.data.size()) == 0) {
    return ::testing::AssertionSuccess();
  }
  if (!floating) return ::testing::AssertionFailure() << want.name << ": bytes differ";
  const size_t size = DTypeSize(want.dtype);
  const size_t n = want.bytes.size() / size;
  int failures = 0;
  std::string detail;
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    const double g = ElementAsDouble(want.dtype, got.data.data() + i * size);
    const double w = ElementAsDouble(want.dtype, want.bytes.data() + i * size);
    const bool ok = (std::isnan(g) && std::isnan(w)) || g == w ||
                    (std::isfinite(w) && std::abs(g - w) <= atol + rtol * std::abs(w));
    if (std::isfinite(w) && std::isfinite(g)) worst = std::max(worst, std::abs(g - w));
    if (!ok && failures++ < 5) {
      absl::StrAppendFormat(&detail, "\n  [%d] got %.9g want %.9g", i, g, w);
    }
  }
  if (failures > 0) {
    return ::testing::AssertionFailure()
           << want.name << ": " << failures << " of " << n << " elements differ (atol " << atol
           << ", rtol " << rtol << ", worst abs diff " << worst << "):" << detail;
  }
  return ::testing::AssertionSuccess();
}

// A fresh directory under the test's temp dir, removed by the destructor.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "ndserve_engine_XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// An FP32 initializer of `shape` holding `v`, for GraphDefs built in tests.
inline Initializer Fp32Init(const std::string& name, kernels::Shape shape, std::vector<float> v) {
  Initializer init;
  init.name = name;
  init.dtype = DType::kFp32;
  init.shape = std::move(shape);
  init.bytes.assign(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  return init;
}

inline void WriteFile(const fs::path& path, absl::string_view text) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
}

}  // namespace ndserve::engine::testing

#endif  // NDSERVE_TESTS_UNIT_ENGINE_ENGINE_TEST_UTIL_H_
