// The `tf32` model parameter (docs/design.md §4.3) on cuda:0, skipped
// without a device: mlp's outputs with TF32 GEMMs against exact FP32 on a batch of 64
// random rows. The difference is printed for the README; the bound is loose on purpose
// (TF32 keeps 10 mantissa bits of each product, so only a gross error fails it).
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "memory/memory_system.h"
#include "tests/gpu/engine/gpu_engine_test_util.h"

namespace ndserve::engine {
namespace {

using gpu_testing::AddModel;
using gpu_testing::Parameter;

TEST(Tf32Test, MlpWithTf32StaysCloseToFp32) {
  NDSERVE_REQUIRE_GPU();
  testing::TempDir fp32_repo, tf32_repo;
  AddModel(fp32_repo.path(), "mlp");
  AddModel(tf32_repo.path(), "mlp", Parameter("tf32", "true"));
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(64 * 64);
  for (float& v : x) v = normal(rng);
  InferenceRequest r;
  r.model_name = "mlp";
  r.inputs.push_back({"input",
                      DType::kFp32,
                      {64, 64},
                      absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(x.data()),
                                                x.size() * sizeof(float))});
  std::vector<InferOutputTensor> outputs;
  for (const testing::TempDir* repo : {&fp32_repo, &tf32_repo}) {
    EngineOptions options;
    options.model_repository = repo->path().string();
    options.device = Device::Cuda(0);
    MemorySystem memory;
    Engine engine(options, &memory);
    ASSERT_TRUE(engine.LoadModel("mlp").ok());
    absl::StatusOr<ModelConfig> config = engine.GetModelConfig("mlp");
    ASSERT_TRUE(config.ok());
    EXPECT_EQ(config->tf32, repo == &tf32_repo);
    absl::StatusOr<InferenceResponse> out = engine.Infer(r);
    ASSERT_TRUE(out.ok()) << out.status();
    outputs.push_back(out->outputs[0]);
  }
  const float diff = gpu_testing::MaxAbsDiff(outputs[0], outputs[1]);
  std::printf("mlp batch 64, TF32 against FP32: max abs difference %g\n", diff);
  EXPECT_TRUE(std::isfinite(diff));
  EXPECT_LE(diff, 1e-2f);  // outputs are probabilities in [0, 1]
}

}  // namespace
}  // namespace ndserve::engine
