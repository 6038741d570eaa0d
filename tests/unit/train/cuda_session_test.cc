// A training session on a model served from GPU memory (docs/design.md §10.2): train/
// runs its ops on host memory, so StartSession refuses it with UNIMPLEMENTED naming the
// first op without a CUDA training path, and keeps no session. Skips without a GPU.
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "engine/engine.h"
#include "gtest/gtest.h"
#include "memory/cuda_runtime.h"
#include "memory/memory_system.h"
#include "train/training_runs.h"

namespace ndserve::train {
namespace {

namespace fs = std::filesystem;

TEST(CudaSessionTest, StartSessionOnACudaModelIsUnimplementedNamingTheOp) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  char tmpl[] = "/tmp/ndserve_cuda_train_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const fs::path repo = tmpl;
  const char* root = std::getenv("NDSERVE_SOURCE_DIR");
  const fs::path mlp = fs::path(root != nullptr ? root : ".") / "examples/models/mlp";
  fs::create_directories(repo / "mlp/1");
  fs::copy_file(mlp / "config.pbtxt", repo / "mlp/config.pbtxt");
  fs::copy_file(mlp / "1/model.onnx", repo / "mlp/1/model.onnx");
  MemorySystem memory;
  {
    engine::EngineOptions options;
    options.model_repository = repo.string();
    options.device = Device::Cuda(0);
    engine::Engine engine(options, &memory);
    ASSERT_TRUE(engine.LoadModel("mlp").ok());
    TrainingRuns runs(&engine, engine::TrainingSessions::Options{});
    TrainingRunOptions run;
    run.target_output = "fc2";
    const absl::Status refused = runs.Start("mlp", 0, run).status();
    EXPECT_TRUE(absl::IsUnimplemented(refused)) << refused;
    EXPECT_NE(refused.message().find("cuda:0"), absl::string_view::npos) << refused;
    EXPECT_NE(refused.message().find("op Gemm"), absl::string_view::npos) << refused;
    EXPECT_TRUE(runs.List().empty());
  }
  fs::remove_all(repo);
}

}  // namespace
}  // namespace ndserve::train
