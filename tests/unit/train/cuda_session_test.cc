// Training sessions on a GPU (docs/design.md §10.2): a session whose trainer scope is on
// cuda:0 runs every op on its own stream and must give the CPU session's losses, gradient
// norms and weights, PyTorch's on the recurrent fixture, refuse a bad label before it
// updates anything, keep the device pool flat from step to step, and train a model the
// engine serves on cuda:0. Skips without a GPU.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "engine/training_scopes.h"
#include "gtest/gtest.h"
#include "memory/cuda_runtime.h"
#include "memory/memory_system.h"
#include "tests/unit/train/train_fixture.h"
#include "tests/unit/train/train_test_util.h"
#include "train/training_run.h"
#include "train/training_runs.h"

namespace ndserve::train {
namespace {

namespace fs = std::filesystem;
using testing_util::Floats;
using testing_util::Must;
using testing_util::Tensor;

fs::path Example(const std::string& name) {
  const char* root = std::getenv("NDSERVE_SOURCE_DIR");
  return fs::path(root != nullptr ? root : ".") / "examples/models" / name / "1/model.onnx";
}

struct Batch {
  std::vector<engine::HostTensor> inputs;
  engine::HostTensor labels;
};

Batch MlpBatch(std::uint32_t seed, std::int64_t label_offset = 0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(32 * 64);
  for (float& v : x) v = dist(rng);
  std::vector<std::int64_t> labels(32);
  for (int i = 0; i < 32; ++i) labels[i] = (i + seed) % 10 + label_offset;
  return {{Tensor("input", DType::kFp32, {32, 64}, x)},
          Tensor("labels", DType::kInt64, {32}, labels)};
}

// Ids repeat within and across bags, so the row scatter adds up.
Batch RecsysBatch(std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int64_t> id(0, 96);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<std::int64_t> ids(16 * 4 * 8);
  for (std::int64_t& v : ids) v = id(rng);
  std::vector<float> dense(16 * 13), labels(16);
  for (float& v : dense) v = dist(rng);
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<float>((i + seed) % 2);
  return {{Tensor("sparse_ids", DType::kInt64, {16, 4, 8}, ids),
           Tensor("dense", DType::kFp32, {16, 13}, dense)},
          Tensor("labels", DType::kFp32, {16, 1}, labels)};
}

// The example models' session settings: the loss reads their logits, "fc2".
TrainingRunOptions HeadOptions(LossKind loss, OptimizerKind optimizer, float lr) {
  TrainingRunOptions options;
  options.loss = loss;
  options.target_output = "fc2";
  options.optimizer = optimizer;
  options.lr = lr;
  return options;
}

void ExpectClose(float got, float want, const std::string& what) {
  EXPECT_NEAR(got, want, 1e-4f * (1.0f + std::fabs(want))) << what;
}

class CudaSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
  std::unique_ptr<TrainingRun> Open(Device device, const std::string& path,
                                    const TrainingRunOptions& options) {
    auto model = Must(memory_.NewBaseManager(device, ManagerLevel::kModel, "model"));
    models_.push_back(model);
    auto scope = Must(engine::TrainerScope::Open(model, "session"));
    return Must(TrainingRun::Create(path, scope, options));
  }
  std::uint64_t DevicePoolBytes() {
    return Must(memory_.GetPool(Device::Cuda(0)))->Stats().allocated_bytes;
  }
  // Steps a CPU and a CUDA run of the same model on the same batches and compares every
  // step's loss and gradient norm, then every trained weight.
  void ExpectSameAsCpu(const std::string& path, const TrainingRunOptions& options,
                       Batch (*make)(std::uint32_t, std::int64_t), int steps) {
    auto cpu = Open(Device::Cpu(), path, options);
    auto gpu = Open(Device::Cuda(0), path, options);
    ASSERT_NE(cpu, nullptr);
    ASSERT_NE(gpu, nullptr);
    for (int k = 0; k < steps; ++k) {
      const Batch b = make(static_cast<std::uint32_t>(k + 1), 0);
      const StepResult want = Must(cpu->Step(b.inputs, b.labels));
      const StepResult got = Must(gpu->Step(b.inputs, b.labels));
      ExpectClose(got.loss, want.loss, absl::StrCat("loss of step ", k + 1));
      ExpectClose(got.grad_norm, want.grad_norm, absl::StrCat("grad norm of step ", k + 1));
    }
    const auto want = Must(cpu->Parameters());
    const auto got = Must(gpu->Parameters());
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t p = 0; p < got.size(); ++p) {
      const std::vector<float> g = Floats(got[p].bytes), w = Floats(want[p].bytes);
      ASSERT_EQ(g.size(), w.size()) << got[p].name;
      for (std::size_t i = 0; i < g.size(); ++i) {
        ExpectClose(g[i], w[i], absl::StrCat(got[p].name, "[", i, "]"));
      }
    }
  }

  MemorySystem memory_;
  std::vector<std::shared_ptr<NDManager>> models_;
};

Batch Mlp(std::uint32_t seed, std::int64_t offset) { return MlpBatch(seed, offset); }
Batch Recsys(std::uint32_t seed, std::int64_t) { return RecsysBatch(seed); }

TEST_F(CudaSessionTest, MlpStepsMatchTheCpuSessionWithEveryOptimizer) {
  for (OptimizerKind optimizer :
       {OptimizerKind::kSgd, OptimizerKind::kMomentum, OptimizerKind::kAdam}) {
    SCOPED_TRACE(static_cast<int>(optimizer));
    ExpectSameAsCpu(Example("mlp").string(), HeadOptions(LossKind::kCrossEntropy, optimizer, 0.05f),
                    Mlp, 5);
  }
}

// On the GPU the ids stay on the device, so the tables' gradients are dense there and
// row-sparse on the CPU: plain SGD must still move the same rows by the same amounts.
TEST_F(CudaSessionTest, RecsysEmbeddingsAndBceMatchTheCpuSession) {
  for (OptimizerKind optimizer : {OptimizerKind::kSgd, OptimizerKind::kAdam}) {
    SCOPED_TRACE(static_cast<int>(optimizer));
    ExpectSameAsCpu(Example("recsys").string(),
                    HeadOptions(LossKind::kBceWithLogits, optimizer, 0.02f), Recsys, 5);
  }
}

// tools/gen_train_fixtures.py's recurrent run (an ONNX LSTM, two time steps per batch,
// the state carried with its history cut) against PyTorch, as TrainingRunTest does on
// the CPU; 1e-4 instead of 1e-5 for cuBLAS's summation order.
TEST_F(CudaSessionTest, TruncatedBpttOnAnOnnxLstmMatchesPyTorch) {
  const std::string folder = testing_util::TrainFixturesDir() + "/recurrent_sgd";
  const auto data = testing_util::ReadTrainFixture(folder);
  auto run = Open(Device::Cuda(0), folder + "/model.onnx", testing_util::RecurrentSgdOptions());
  ASSERT_NE(run, nullptr);
  const std::vector<float> losses = Floats(data.at("losses").bytes);
  std::uint64_t after_2 = 0;
  for (int k = 0; k < 5; ++k) {
    const auto [inputs, labels] = testing_util::RecurrentBatch(data, k);
    ExpectClose(Must(run->Step(inputs, labels)).loss, losses[static_cast<std::size_t>(k)],
                absl::StrCat("loss of step ", k + 1));
    if (k == 1) after_2 = DevicePoolBytes();
  }
  for (const engine::HostTensor& p : Must(run->Parameters())) {
    const std::vector<float> want = Floats(data.at(absl::StrCat("step5.onnx.", p.name)).bytes);
    const std::vector<float> got = Floats(p.bytes);
    ASSERT_EQ(got.size(), want.size()) << p.name;
    for (std::size_t i = 0; i < got.size(); ++i) {
      ExpectClose(got[i], want[i], absl::StrCat(p.name, "[", i, "]"));
    }
  }
  EXPECT_EQ(DevicePoolBytes(), after_2);
}

// The device finds the label out of range only inside a kernel: the step must read the
// flag before the optimizer runs, so the weights stay as they were and the session goes
// on. The pool is flat across steps.
TEST_F(CudaSessionTest, ABadLabelIsRefusedBeforeAnyUpdateAndThePoolStaysFlat) {
  auto run = Open(Device::Cuda(0), Example("mlp").string(),
                  HeadOptions(LossKind::kCrossEntropy, OptimizerKind::kMomentum, 0.05f));
  ASSERT_NE(run, nullptr);
  const Batch good = MlpBatch(1);
  Must(run->Step(good.inputs, good.labels));
  const auto before = Must(run->Parameters());
  const Batch bad = MlpBatch(2, /*label_offset=*/40);
  const absl::Status refused = run->Step(bad.inputs, bad.labels).status();
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  const auto after = Must(run->Parameters());
  for (std::size_t p = 0; p < before.size(); ++p) EXPECT_EQ(after[p].bytes, before[p].bytes);
  const float first = Must(run->Step(good.inputs, good.labels)).loss;
  std::uint64_t at_10 = 0;
  float last = first;
  for (int k = 0; k < 100; ++k) {
    last = Must(run->Step(good.inputs, good.labels)).loss;
    if (k == 9) at_10 = DevicePoolBytes();
  }
  EXPECT_LT(last, first);
  EXPECT_EQ(DevicePoolBytes(), at_10);
}

// Through the engine: a session on a model served from cuda:0 starts, steps, and commits
// its weights as the next version, which the engine then serves.
TEST_F(CudaSessionTest, AModelServedOnCudaTrainsAndCommits) {
  char tmpl[] = "/tmp/ndserve_cuda_train_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const fs::path repo = tmpl;
  const fs::path mlp = Example("mlp").parent_path().parent_path();
  fs::create_directories(repo / "mlp/1");
  fs::copy_file(mlp / "config.pbtxt", repo / "mlp/config.pbtxt");
  fs::copy_file(mlp / "1/model.onnx", repo / "mlp/1/model.onnx");
  {
    MemorySystem memory;
    engine::EngineOptions engine_options;
    engine_options.model_repository = repo.string();
    engine_options.device = Device::Cuda(0);
    engine::Engine engine(engine_options, &memory);
    ASSERT_TRUE(engine.LoadModel("mlp").ok());
    {
      // KIND_AUTO must have put it on the GPU, or this would test the CPU session again.
      auto served = engine.GetModel("mlp", 1);
      ASSERT_TRUE(served.ok()) << served.status();
      ASSERT_TRUE((*served)->device().is_cuda()) << (*served)->device().ToString();
    }
    TrainingRuns runs(&engine, engine::TrainingSessions::Options{});
    TrainingRunOptions options;
    options.target_output = "fc2";
    const StartedSession session = Must(runs.Start("mlp", 0, options));
    const Batch b = MlpBatch(3);
    for (int k = 0; k < 3; ++k) Must(runs.Step(session.id, b.inputs, b.labels));
    const CommitResult committed = Must(runs.Commit(session.id));
    EXPECT_EQ(committed.version, 2);
    EXPECT_EQ(committed.steps, 3);
    EXPECT_TRUE(runs.List().empty());
  }
  fs::remove_all(repo);
}

}  // namespace
}  // namespace ndserve::train
