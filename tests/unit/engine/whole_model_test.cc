// The example models (mlp, recsys) and the transformer fixture, loaded from their
// repositories with their config.pbtxt and compared with the numpy reference outputs
// (tests/fixtures/models/*/reference). CPU always; CUDA when a device is present.

#include <string>

#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "gtest/gtest.h"
#include "memory/cuda_runtime.h"
#include "memory/memory_system.h"
#include "tests/unit/engine/engine_test_util.h"

namespace ndserve::engine {
namespace {

using testing::SourceDir;

struct WholeModel {
  const char* name;
  const char* repository;  // relative to the source dir
};

class WholeModelTest : public ::testing::TestWithParam<std::tuple<WholeModel, DeviceKind>> {};

TEST_P(WholeModelTest, MatchesReference) {
  const auto& [m, kind] = GetParam();
  if (kind == DeviceKind::kCuda && CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  if (std::string(m.name) == "recsys") NDSERVE_REQUIRE_RECSYS();
  EngineOptions options;
  options.model_repository = (SourceDir() / m.repository).string();
  options.device = kind == DeviceKind::kCuda ? Device::Cuda(0) : Device::Cpu();
  MemorySystem memory;
  Engine engine(options, &memory);
  ASSERT_TRUE(engine.LoadModel(m.name).ok());
  const testing::Case c =
      testing::ReadCase(SourceDir() / "tests/fixtures/models" / m.name / "reference");
  ASSERT_FALSE(c.inputs.empty());
  absl::StatusOr<InferenceResponse> r = engine.Infer(testing::MakeRequest(c, m.name));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model_name, m.name);
  EXPECT_EQ(r->model_version, 1);
  ASSERT_EQ(r->outputs.size(), c.outputs.size());
  for (size_t i = 0; i < c.outputs.size(); ++i) {
    EXPECT_TRUE(testing::OutputMatches(r->outputs[i], c.outputs[i], c.atol, c.rtol));
  }
  EXPECT_GT(r->timings.context_peak_bytes, 0u);

  // Each row of the batch alone gives that row of the batched result.
  const testing::CaseTensor& in0 = c.inputs[0];
  const int64_t batch = in0.dims[0];
  for (int64_t row = 0; row < batch; ++row) {
    InferenceRequest one;
    one.model_name = m.name;
    for (const testing::CaseTensor& t : c.inputs) {
      const size_t row_bytes = t.bytes.size() / batch;
      std::vector<int64_t> dims = t.dims;
      dims[0] = 1;
      one.inputs.push_back({t.name, t.dtype, dims,
                            absl::MakeConstSpan(t.bytes).subspan(row * row_bytes, row_bytes)});
    }
    absl::StatusOr<InferenceResponse> single = engine.Infer(one);
    ASSERT_TRUE(single.ok()) << single.status();
    for (size_t i = 0; i < c.outputs.size(); ++i) {
      testing::CaseTensor want = c.outputs[i];
      const size_t row_bytes = want.bytes.size() / batch;
      want.bytes.assign(want.bytes.begin() + row * row_bytes,
                        want.bytes.begin() + (row + 1) * row_bytes);
      want.dims[0] = 1;
      EXPECT_TRUE(testing::OutputMatches(single->outputs[i], want, c.atol, c.rtol))
          << "row " << row;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, WholeModelTest,
    ::testing::Combine(::testing::Values(WholeModel{"mlp", "examples/models"},
                                         WholeModel{"recsys", "examples/models"},
                                         WholeModel{"transformer", "tests/fixtures/models"}),
                       ::testing::Values(DeviceKind::kCpu, DeviceKind::kCuda)),
    [](const ::testing::TestParamInfo<WholeModelTest::ParamType>& info) {
      return absl::StrCat(std::get<0>(info.param).name,
                          std::get<1>(info.param) == DeviceKind::kCuda ? "_cuda" : "_cpu");
    });

}  // namespace
}  // namespace ndserve::engine
