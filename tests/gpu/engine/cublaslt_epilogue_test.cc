// The `cublaslt` model parameter (docs/design.md §4.3) on cuda:0, skipped without a
// device: mlp's three Gemms (bias + Relu, bias + Relu, bias) run as one cuBLASLt call each
// with the parameter on, as cuBLAS products with kernels of their own with it off, and
// both give the CPU engine's outputs. The call count proves the fused path is the one
// taken: the numbers alone would not, since the fallback computes the same thing.
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/gpu_resources.h"
#include "memory/memory_system.h"
#include "tests/gpu/engine/gpu_engine_test_util.h"

namespace ndserve::engine {
namespace {

using gpu_testing::AddModel;
using gpu_testing::Parameter;

// `runs` requests of mlp on `device`; `lt_calls` gets the cuBLASLt products they made
// (counted after the load, whose warm-up run makes some too).
InferOutputTensor RunMlp(const std::string& repo, Device device, const InferenceRequest& r,
                         int runs, uint64_t* lt_calls = nullptr) {
  EngineOptions options;
  options.model_repository = repo;
  options.device = device;
  MemorySystem memory;
  Engine engine(options, &memory);
  EXPECT_TRUE(engine.LoadModel("mlp").ok());
  const uint64_t before = kernels::CublasLtEpilogueGemms();
  InferOutputTensor last;
  for (int i = 0; i < runs; ++i) {
    absl::StatusOr<InferenceResponse> out = engine.Infer(r);
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) break;
    last = out->outputs[0];
  }
  if (lt_calls != nullptr) *lt_calls = kernels::CublasLtEpilogueGemms() - before;
  return last;
}

TEST(CublasLtEpilogueTest, MlpGemmsAreOneCublasLtCallEachAndMatchTheCpu) {
  NDSERVE_REQUIRE_GPU();
  testing::TempDir lt_repo, plain_repo;
  // Graphs off, so that every run calls the kernels (a replay calls none).
  AddModel(lt_repo.path(), "mlp", Parameter("cuda_graphs", "false"));
  AddModel(plain_repo.path(), "mlp",
           Parameter("cuda_graphs", "false") + "\n" + Parameter("cublaslt", "false"));
  for (const int64_t batch : {1, 64}) {
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(batch * 64);
    for (float& v : x) v = normal(rng);
    InferenceRequest r;
    r.model_name = "mlp";
    r.inputs.push_back({"input",
                        DType::kFp32,
                        {batch, 64},
                        absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(x.data()),
                                                  x.size() * sizeof(float))});
    constexpr int kRuns = 3;
    const InferOutputTensor cpu = RunMlp(lt_repo.path().string(), Device::Cpu(), r, 1);
    uint64_t lt_calls = 0, plain_calls = 0;
    const InferOutputTensor lt =
        RunMlp(lt_repo.path().string(), Device::Cuda(0), r, kRuns, &lt_calls);
    EXPECT_EQ(lt_calls, 3u * kRuns) << "batch " << batch;
    const InferOutputTensor plain =
        RunMlp(plain_repo.path().string(), Device::Cuda(0), r, kRuns, &plain_calls);
    EXPECT_EQ(plain_calls, 0u) << "batch " << batch;
    const float lt_diff = gpu_testing::MaxAbsDiff(lt, cpu);
    const float plain_diff = gpu_testing::MaxAbsDiff(plain, cpu);
    std::printf(
        "mlp batch %lld against the CPU: max abs diff %g with cuBLASLt's epilogue, %g "
        "without\n",
        static_cast<long long>(batch), lt_diff, plain_diff);
    // Probabilities in [0, 1]; FP32 products of 64-wide rows differ from the CPU's only
    // in summation order.
    EXPECT_LE(lt_diff, 1e-5f) << "batch " << batch;
    EXPECT_LE(plain_diff, 1e-5f) << "batch " << batch;
  }
}

}  // namespace
}  // namespace ndserve::engine
