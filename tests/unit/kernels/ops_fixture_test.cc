// Runs every per-op fixture of tests/fixtures/ops (written by tools/gen_models.py with a
// numpy reference) through the dispatch table on every device present, with the
// tolerance the fixture states. The ONNX attributes and shape inputs go through
// BuildOpAttrs exactly as the engine's would.
#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "kernels/node_attrs.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ndserve::kernels::testing {
namespace {

namespace fs = std::filesystem;

struct FixtureTensor {
  std::string kind;  // input | const | output
  std::string name;
  HostTensor tensor;
};

struct Fixture {
  std::string op_type;
  int opset = 0;
  AttrMap attrs;
  std::vector<FixtureTensor> inputs;  // node input order
  std::vector<FixtureTensor> outputs;
  double atol = 0, rtol = 0;
  std::string model;
};

absl::StatusOr<Shape> ParseDims(absl::string_view text) {
  if (!absl::ConsumePrefix(&text, "[") || !absl::ConsumeSuffix(&text, "]")) {
    return absl::InvalidArgumentError(absl::StrCat("bad dims '", text, "'"));
  }
  Shape shape;
  if (text.empty()) return shape;
  for (absl::string_view d : absl::StrSplit(text, ',')) {
    int64_t v;
    if (!absl::SimpleAtoi(d, &v)) return absl::InvalidArgumentError(absl::StrCat("bad dim ", d));
    shape.push_back(v);
  }
  return shape;
}

absl::StatusOr<std::vector<uint8_t>> ReadFile(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot open ", path.string()));
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// Parses case.txt (grammar in tools/gen_models.py and the file's own header).
absl::StatusOr<Fixture> LoadFixture(const fs::path& dir) {
  std::ifstream f(dir / "case.txt");
  if (!f) return absl::NotFoundError(absl::StrCat("no case.txt in ", dir.string()));
  Fixture fx;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> w = absl::StrSplit(line, ' ', absl::SkipEmpty());
    const std::string& kw = w[0];
    if (kw == "model" && w.size() == 2) {
      fx.model = w[1];
    } else if (kw == "op" && w.size() == 2) {
      fx.op_type = w[1];
    } else if (kw == "opset" && w.size() == 2) {
      if (!absl::SimpleAtoi(w[1], &fx.opset)) return absl::InvalidArgumentError(line);
    } else if (kw == "tolerance" && w.size() == 3) {
      if (!absl::SimpleAtod(w[1], &fx.atol) || !absl::SimpleAtod(w[2], &fx.rtol)) {
        return absl::InvalidArgumentError(line);
      }
    } else if (kw == "attr" && w.size() == 4) {
      const std::string& type = w[2];
      std::vector<std::string> items = absl::StrSplit(w[3], ',');
      if (type == "int") {
        int64_t v;
        if (!absl::SimpleAtoi(w[3], &v)) return absl::InvalidArgumentError(line);
        fx.attrs[w[1]] = v;
      } else if (type == "float") {
        float v;
        if (!absl::SimpleAtof(w[3], &v)) return absl::InvalidArgumentError(line);
        fx.attrs[w[1]] = v;
      } else if (type == "ints") {
        std::vector<int64_t> v(items.size());
        for (std::size_t i = 0; i < items.size(); ++i) {
          if (!absl::SimpleAtoi(items[i], &v[i])) return absl::InvalidArgumentError(line);
        }
        fx.attrs[w[1]] = v;
      } else if (type == "string") {
        fx.attrs[w[1]] = w[3];
      } else {
        return absl::InvalidArgumentError(absl::StrCat("unknown attr type: ", line));
      }
    } else if ((kw == "input" || kw == "const" || kw == "output") && w.size() == 5) {
      NDS_ASSIGN_OR_RETURN(DType dtype, ParseDType(w[2]));
      NDS_ASSIGN_OR_RETURN(Shape shape, ParseDims(w[3]));
      NDS_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadFile(dir / w[4]));
      HostTensor t{dtype, shape, std::move(bytes)};
      if (t.bytes.size() != static_cast<std::size_t>(t.numel()) * DTypeSize(dtype)) {
        return absl::InvalidArgumentError(absl::StrCat(
            w[4], " has ", t.bytes.size(), " bytes, expected ", t.numel() * DTypeSize(dtype)));
      }
      (kw == "output" ? fx.outputs : fx.inputs).push_back({kw, w[1], std::move(t)});
    } else {
      return absl::InvalidArgumentError(absl::StrCat("bad line: ", line));
    }
  }
  return fx;
}

fs::path OpsDir() { return SourceDir() / "tests/fixtures/ops"; }

std::vector<std::string> CaseNames() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(OpsDir(), ec)) {
    if (fs::exists(entry.path() / "case.txt")) names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

using Param = std::tuple<std::string, Device>;

class OpsFixtureTest : public ::testing::TestWithParam<Param> {};

TEST_P(OpsFixtureTest, MatchesNumpyReference) {
  const auto& [name, device] = GetParam();
  auto fx = LoadFixture(OpsDir() / name);
  ASSERT_TRUE(fx.ok()) << fx.status();
  auto op = OpKindFromOnnx(fx->op_type);
  ASSERT_TRUE(op.ok()) << op.status();

  // Split node inputs into kernel inputs and host inputs (ops.def).
  std::vector<HostTensor> inputs;
  std::vector<std::optional<HostValue>> host(fx->inputs.size());
  for (std::size_t i = 0; i < fx->inputs.size(); ++i) {
    const HostTensor& t = fx->inputs[i].tensor;
    if (GetOpInfo(*op).IsHostInput(static_cast<int>(i))) {
      ASSERT_EQ(fx->inputs[i].kind, "const") << "host inputs must be initializers";
      auto value = HostValue::FromBytes(t.dtype, t.shape, t.bytes);
      ASSERT_TRUE(value.ok()) << value.status();
      host[i] = *std::move(value);
    } else {
      inputs.push_back(t);
    }
  }
  auto attrs = BuildOpAttrs(*op, fx->opset, fx->attrs, HostInputs(std::move(host)));
  ASSERT_TRUE(attrs.ok()) << attrs.status();

  DeviceRunner runner(device);
  auto got = runner.Run(*op, inputs, *attrs, static_cast<int>(fx->outputs.size()));
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), fx->outputs.size());
  for (std::size_t i = 0; i < got->size(); ++i) {
    EXPECT_TRUE(AllClose((*got)[i], fx->outputs[i].tensor, fx->atol, fx->rtol))
        << "output " << fx->outputs[i].name;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, OpsFixtureTest,
                         ::testing::Combine(::testing::ValuesIn(CaseNames()),
                                            ::testing::ValuesIn(TestDevices())),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           const Device& d = std::get<1>(info.param);
                           return absl::StrCat(
                               std::get<0>(info.param), "_",
                               d.is_cuda() ? absl::StrCat("cuda", d.ordinal) : "cpu");
                         });

TEST(OpsFixtureCoverage, EveryOpHasAFixture) {
  const std::vector<std::string> names = CaseNames();
  ASSERT_FALSE(names.empty()) << "no fixtures under " << OpsDir()
                              << "; run /usr/bin/python3 tools/gen_models.py";
  std::set<std::string> ops;
  for (const std::string& name : names) {
    auto fx = LoadFixture(OpsDir() / name);
    ASSERT_TRUE(fx.ok()) << name << ": " << fx.status();
    EXPECT_TRUE(fs::exists(OpsDir() / name / fx->model)) << name;
    ops.insert(fx->op_type);
  }
  for (int i = 0; i < kNumOpKinds; ++i) {
    EXPECT_TRUE(ops.count(std::string(OpKindName(static_cast<OpKind>(i)))))
        << "no fixture for " << OpKindName(static_cast<OpKind>(i));
  }
}

TEST(ModelFixtures, ReferenceManifestsAreConsistent) {
  for (const char* model : {"mlp", "recsys", "transformer"}) {
    const fs::path dir = SourceDir() / "tests/fixtures/models" / model / "reference";
    auto fx = LoadFixture(dir);
    ASSERT_TRUE(fx.ok()) << model << ": " << fx.status();
    // recsys's 51 MB model is not committed; tools/gen_models.py writes it.
    if (std::string(model) != "recsys") {
      EXPECT_TRUE(fs::exists(dir / fx->model)) << model << ": " << fx->model;
    }
    EXPECT_FALSE(fx->inputs.empty());
    EXPECT_EQ(fx->outputs.size(), 1u);
  }
}

}  // namespace
}  // namespace ndserve::kernels::testing
