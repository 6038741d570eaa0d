// TrainingRun and TrainingRuns (docs/design.md §10.1): a served model's session steps
// with its loss falling and the pool flat, and Commit publishes the trained parameters as
// the next version.

#include "train/training_run.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "engine/training_scopes.h"
#include "gtest/gtest.h"
#include "memory/memory_system.h"
#include "tests/unit/train/train_fixture.h"
#include "tests/unit/train/train_test_util.h"
#include "train/training_runs.h"

namespace ndserve::train {
namespace {

namespace fs = std::filesystem;
using testing_util::Floats;
using testing_util::Must;
using testing_util::Tensor;

fs::path Example(const std::string& name) {
  const char* root = std::getenv("NDSERVE_SOURCE_DIR");
  return fs::path(root != nullptr ? root : ".") / "examples/models" / name;
}


// A fixed MLP batch: 16 random rows, labels i % 10.
struct MlpBatch {
  std::vector<engine::HostTensor> inputs;
  engine::HostTensor labels;
};
MlpBatch MakeMlpBatch(std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(16 * 64);
  for (float& v : x) v = dist(rng);
  std::vector<std::int64_t> labels(16);
  for (int i = 0; i < 16; ++i) labels[i] = i % 10;
  return {{Tensor("input", DType::kFp32, {16, 64}, x)},
          Tensor("labels", DType::kInt64, {16}, labels)};
}

TrainingRunOptions MlpOptions() {
  TrainingRunOptions options;
  options.loss = LossKind::kCrossEntropy;
  options.target_output = "fc2";
  options.optimizer = OptimizerKind::kMomentum;
  options.lr = 0.05f;
  return options;
}

class TrainingRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = Must(memory_.NewBaseManager(Device::Cpu(), ManagerLevel::kModel, "model"));
    scope_ = Must(engine::TrainerScope::Open(model_, "run"));
  }
  std::uint64_t PoolBytes() {
    return Must(memory_.GetPool(Device::Cpu()))->Stats().allocated_bytes;
  }

  MemorySystem memory_;
  std::shared_ptr<NDManager> model_;
  std::shared_ptr<engine::TrainerScope> scope_;
};

TEST_F(TrainingRunTest, LossFallsAndThePoolIsFlatFromStepTenToStepTwoHundred) {
  auto run = Must(TrainingRun::Create((Example("mlp") / "1/model.onnx").string(), scope_,
                                      MlpOptions()));
  ASSERT_NE(run, nullptr);
  const MlpBatch batch = MakeMlpBatch(1);
  const std::uint64_t trainer_bytes = scope_->manager()->bytes();
  float first = 0, last = 0;
  std::uint64_t after_10 = 0;
  for (int step = 1; step <= 200; ++step) {
    StepResult r = Must(run->Step(batch.inputs, batch.labels));
    ASSERT_EQ(r.step, step);
    EXPECT_GT(r.batch_peak_bytes, 0u);
    if (step == 1) {
      first = r.loss;
      EXPECT_GT(r.grad_norm, 0.0f);
    }
    last = r.loss;
    if (step == 10) after_10 = PoolBytes();
  }
  EXPECT_LT(last, 0.5f * first);
  EXPECT_EQ(PoolBytes(), after_10);
  EXPECT_EQ(scope_->manager()->bytes(), trainer_bytes);
  EXPECT_EQ(scope_->steps_completed(), 200);
}

TEST_F(TrainingRunTest, RecsysWithBceOnItsLogitsAndAdam) {
  TrainingRunOptions options;
  options.loss = LossKind::kBceWithLogits;
  options.target_output = "fc2";
  options.optimizer = OptimizerKind::kAdam;
  options.lr = 0.01f;
  auto run = Must(TrainingRun::Create((Example("recsys") / "1/model.onnx").string(), scope_,
                                      options));
  ASSERT_NE(run, nullptr);
  std::vector<std::int64_t> ids(8 * 4 * 8);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>(i * 13 % 97);
  const std::vector<engine::HostTensor> inputs{
      Tensor("sparse_ids", DType::kInt64, {8, 4, 8}, ids),
      Tensor("dense", DType::kFp32, {8, 13}, std::vector<float>(8 * 13, 0.25f))};
  const engine::HostTensor labels =
      Tensor("labels", DType::kFp32, {8, 1}, std::vector<float>{1, 0, 1, 0, 1, 1, 0, 0});
  const float first = Must(run->Step(inputs, labels)).loss;
  float last = first;
  for (int i = 0; i < 60; ++i) last = Must(run->Step(inputs, labels)).loss;
  EXPECT_LT(last, 0.5f * first);
}

TEST_F(TrainingRunTest, BadInputIsInvalidArgumentNamingIt) {
  auto run = Must(TrainingRun::Create((Example("mlp") / "1/model.onnx").string(), scope_,
                                      MlpOptions()));
  ASSERT_NE(run, nullptr);
  MlpBatch batch = MakeMlpBatch(2);
  batch.inputs[0].name = "inptu";
  absl::Status status = run->Step(batch.inputs, batch.labels).status();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_NE(status.message().find("inptu"), absl::string_view::npos) << status;

  batch = MakeMlpBatch(2);
  batch.inputs[0].bytes.resize(10);
  status = run->Step(batch.inputs, batch.labels).status();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_NE(status.message().find("input"), absl::string_view::npos) << status;

  batch = MakeMlpBatch(2);
  batch.labels = Tensor("labels", DType::kInt64, {3}, std::vector<std::int64_t>{1, 2, 3});
  status = run->Step(batch.inputs, batch.labels).status();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  // A refused step leaves the run usable.
  batch = MakeMlpBatch(2);
  EXPECT_TRUE(run->Step(batch.inputs, batch.labels).ok());
}

// A label or id out of range is found by a kernel (the loss, Gather); the step is refused
// before the optimizer runs, so every weight stays as it was (on a GPU the same holds
// through the device's error flag: CudaSessionTest).
TEST_F(TrainingRunTest, AnOutOfRangeLabelOrIdLeavesEveryWeightAsItWas) {
  auto mlp = Must(TrainingRun::Create((Example("mlp") / "1/model.onnx").string(), scope_,
                                      MlpOptions()));
  ASSERT_NE(mlp, nullptr);
  MlpBatch batch = MakeMlpBatch(3);
  Must(mlp->Step(batch.inputs, batch.labels));
  const auto before = Must(mlp->Parameters());
  batch.labels = Tensor("labels", DType::kInt64, {16}, std::vector<std::int64_t>(16, 10));
  absl::Status status = mlp->Step(batch.inputs, batch.labels).status();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  const auto after = Must(mlp->Parameters());
  ASSERT_EQ(after.size(), before.size());
  for (std::size_t p = 0; p < before.size(); ++p) EXPECT_EQ(after[p].bytes, before[p].bytes);

  TrainingRunOptions options;
  options.loss = LossKind::kBceWithLogits;
  options.target_output = "fc2";
  options.optimizer = OptimizerKind::kSgd;
  auto scope = Must(engine::TrainerScope::Open(model_, "recsys"));
  auto recsys =
      Must(TrainingRun::Create((Example("recsys") / "1/model.onnx").string(), scope, options));
  ASSERT_NE(recsys, nullptr);
  std::vector<std::int64_t> ids(2 * 4 * 8, 5);
  const engine::HostTensor dense =
      Tensor("dense", DType::kFp32, {2, 13}, std::vector<float>(26, 0.5f));
  const engine::HostTensor clicks = Tensor("labels", DType::kFp32, {2, 1}, std::vector<float>{1, 0});
  Must(recsys->Step({Tensor("sparse_ids", DType::kInt64, {2, 4, 8}, ids), dense}, clicks));
  const auto tables = Must(recsys->Parameters());
  ids[7] = 1 << 30;
  status = recsys->Step({Tensor("sparse_ids", DType::kInt64, {2, 4, 8}, ids), dense}, clicks)
               .status();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  const auto unchanged = Must(recsys->Parameters());
  for (std::size_t p = 0; p < tables.size(); ++p) EXPECT_EQ(unchanged[p].bytes, tables[p].bytes);
  ids[7] = 5;
  EXPECT_TRUE(recsys->Step({Tensor("sparse_ids", DType::kInt64, {2, 4, 8}, ids), dense}, clicks).ok());
}

TEST_F(TrainingRunTest, BadOptionsAreInvalidArgument) {
  const std::string path = (Example("mlp") / "1/model.onnx").string();
  TrainingRunOptions options = MlpOptions();
  options.target_output = "fc7";
  EXPECT_TRUE(absl::IsInvalidArgument(TrainingRun::Create(path, scope_, options).status()));
  options = MlpOptions();
  options.lr = 0.0f;
  EXPECT_TRUE(absl::IsInvalidArgument(TrainingRun::Create(path, scope_, options).status()));
  options = MlpOptions();
  options.truncated_bptt_steps = 4;
  EXPECT_TRUE(absl::IsInvalidArgument(TrainingRun::Create(path, scope_, options).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseLossKind("hinge").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseOptimizerKind("lbfgs").status()));
}

TEST_F(TrainingRunTest, AClosedSessionRefusesSteps) {
  auto run = Must(TrainingRun::Create((Example("mlp") / "1/model.onnx").string(), scope_,
                                      MlpOptions()));
  ASSERT_NE(run, nullptr);
  ASSERT_TRUE(scope_->Close().ok());
  const MlpBatch batch = MakeMlpBatch(3);
  EXPECT_TRUE(absl::IsFailedPrecondition(run->Step(batch.inputs, batch.labels).status()));
}

// The fixture files tools/gen_train_fixtures.py writes: <name> -> (dims, bytes).
using testing_util::FixtureTensor;
using testing_util::ReadTrainFixture;


// Truncated BPTT through a session (docs/design.md §10.1): a served ONNX LSTM trained
// two time steps per batch, its state carried from batch to batch with the history cut,
// gives PyTorch's losses and weights when PyTorch detach()es the state at the same
// boundaries (tools/gen_train_fixtures.py, "recurrent" with SGD lr 0.1).
TEST_F(TrainingRunTest, TruncatedBpttOnAnOnnxLstmMatchesPyTorchDetachingAtTheSameSteps) {
  const std::string folder = std::string(NDSERVE_TRAIN_FIXTURES) + "/recurrent_sgd";
  const auto data = ReadTrainFixture(folder);
  auto run =
      Must(TrainingRun::Create(folder + "/model.onnx", scope_, testing_util::RecurrentSgdOptions()));
  ASSERT_NE(run, nullptr);
  const std::vector<float> losses = Floats(data.at("losses").bytes);
  ASSERT_EQ(losses.size(), 5u);
  auto batch = [&](int k) { return testing_util::RecurrentBatch(data, k); };
  auto expect_weights = [&](int after) {
    for (const engine::HostTensor& p : Must(run->Parameters())) {
      const std::vector<float> want =
          Floats(data.at(absl::StrCat("step", after, ".onnx.", p.name)).bytes);
      const std::vector<float> got = Floats(p.bytes);
      ASSERT_EQ(got.size(), want.size()) << p.name;
      for (std::size_t i = 0; i < got.size(); ++i) {
        EXPECT_NEAR(got[i], want[i], 1e-5f) << p.name << "[" << i << "] after step " << after;
      }
    }
  };
  std::uint64_t after_2 = 0;
  for (int k = 0; k < 5; ++k) {
    const auto [inputs, labels] = batch(k);
    const StepResult r = Must(run->Step(inputs, labels));
    EXPECT_NEAR(r.loss, losses[k], 1e-5f) << "step " << k + 1;
    if (k == 0) expect_weights(1);
    if (k == 1) after_2 = PoolBytes();
  }
  expect_weights(5);
  // The carried state keeps its value, not its history: nothing grows from step to step.
  EXPECT_EQ(PoolBytes(), after_2);

  // The session feeds the state; a batch is truncated_bptt_steps time steps.
  auto [inputs, labels] = batch(0);
  std::vector<engine::HostTensor> with_state = inputs;
  with_state.push_back({"h0", DType::kFp32, {1, 4, 5}, std::vector<std::uint8_t>(80)});
  absl::Status status = run->Step(with_state, labels).status();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_NE(status.message().find("h0"), absl::string_view::npos) << status;
  engine::HostTensor longer = inputs[0];
  longer.shape[0] = 3;
  longer.bytes.resize(longer.bytes.size() / 2 * 3);
  const engine::HostTensor longer_labels{"y", DType::kFp32, {12, 1}, std::vector<std::uint8_t>(48)};
  status = run->Step({longer}, longer_labels).status();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_NE(status.message().find("truncated_bptt_steps"), absl::string_view::npos) << status;
}

class TrainingRunsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ndserve_train_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    repo_ = tmpl;
    fs::create_directories(repo_ / "mlp/1");
    fs::copy_file(Example("mlp") / "config.pbtxt", repo_ / "mlp/config.pbtxt");
    fs::copy_file(Example("mlp") / "1/model.onnx", repo_ / "mlp/1/model.onnx");
    engine::EngineOptions options;
    options.model_repository = repo_.string();
    engine_ = std::make_unique<engine::Engine>(options, &memory_);
    ASSERT_TRUE(engine_->LoadModel("mlp").ok());
    engine::TrainingSessions::Options sessions;
    sessions.max_sessions_per_model = 2;
    sessions.clock = [this] { return now_; };
    runs_ = std::make_unique<TrainingRuns>(engine_.get(), sessions);
  }
  void TearDown() override {
    runs_.reset();
    engine_.reset();
    fs::remove_all(repo_);
  }
  std::vector<float> Infer(const std::vector<float>& x) {
    engine::InferenceRequest request;
    request.model_name = "mlp";
    request.inputs.push_back({"input", DType::kFp32, {1, 64},
                              absl::MakeConstSpan(reinterpret_cast<const std::uint8_t*>(x.data()),
                                                  x.size() * 4)});
    engine::InferenceResponse r = Must(engine_->Infer(request));
    std::vector<float> out(r.outputs.at(0).data.size() / 4);
    std::memcpy(out.data(), r.outputs[0].data.data(), out.size() * 4);
    return out;
  }

  fs::path repo_;
  MemorySystem memory_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<TrainingRuns> runs_;
  absl::Time now_ = absl::FromUnixSeconds(1000);
};

TEST_F(TrainingRunsTest, CommitServesTheTrainedParametersAsTheNextVersion) {
  const std::vector<float> x(64, 0.5f);
  const std::vector<float> before = Infer(x);
  StartedSession s = Must(runs_->Start("mlp", 0, MlpOptions()));
  EXPECT_EQ(s.version, 1);
  EXPECT_EQ(s.parameters.size(), 6u);
  ASSERT_EQ(runs_->List().size(), 1u);
  const MlpBatch batch = MakeMlpBatch(4);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(runs_->Step(s.id, batch.inputs, batch.labels).ok());
  EXPECT_EQ(runs_->List()[0].steps, 5);
  CommitResult c = Must(runs_->Commit(s.id));
  EXPECT_EQ(c.version, 2);
  EXPECT_EQ(c.steps, 5);
  EXPECT_TRUE(fs::exists(repo_ / "mlp/2/model.onnx"));
  EXPECT_TRUE(engine_->IsModelReady("mlp", 2));
  EXPECT_NE(Infer(x), before);
  // The session ended with the commit.
  EXPECT_TRUE(runs_->List().empty());
  EXPECT_TRUE(absl::IsNotFound(runs_->Commit(s.id).status()));
}

// A Train stream's steps (docs/design.md §10.1): batches come through the eager
// BatchIterator, which frees batch k once step k is done and never holds more than two,
// and the steps give what the same batches give stepped from host tensors.
TEST_F(TrainingRunsTest, AStreamStepsOnEagerBatchesHoldingAtMostTwoWithUnchangedResults) {
  constexpr int kBatches = 30;
  std::vector<MlpBatch> batches;
  for (int k = 0; k < kBatches; ++k) batches.push_back(MakeMlpBatch(100 + k));
  StartedSession host = Must(runs_->Start("mlp", 0, MlpOptions()));
  std::vector<StepResult> want;
  for (const MlpBatch& b : batches) want.push_back(Must(runs_->Step(host.id, b.inputs, b.labels)));
  ASSERT_TRUE(runs_->Abort(host.id).ok());

  auto source_of = [&batches](int* pulled) {
    return [&batches, pulled]() -> absl::StatusOr<std::optional<engine::HostBatch>> {
      if (*pulled == kBatches) return std::optional<engine::HostBatch>();
      const MlpBatch& b = batches[(*pulled)++];
      engine::HostBatch host_batch = b.inputs;
      host_batch.push_back(b.labels);
      return std::optional<engine::HostBatch>(std::move(host_batch));
    };
  };
  auto pool_bytes = [this] {
    return Must(memory_.GetPool(Device::Cpu()))->Stats().allocated_bytes;
  };
  for (const bool read_ahead : {true, false}) {
    SCOPED_TRACE(read_ahead ? "reading ahead" : "pulling each batch when its step is due");
    StartedSession s = Must(runs_->Start("mlp", 0, MlpOptions()));
    int pulled = 0;
    std::vector<StepResult> got;
    std::vector<std::uint64_t> pool;
    const absl::Status streamed = runs_->Stream(
        s.id, source_of(&pulled), [read_ahead] { return read_ahead; },
        [&](const StepResult& r) {
          got.push_back(r);
          pool.push_back(pool_bytes());
          // Batch k+1 is pulled before step k only when reading ahead.
          EXPECT_EQ(pulled, std::min<int>(got.size() + (read_ahead ? 1 : 0), kBatches));
          return true;
        });
    ASSERT_TRUE(streamed.ok()) << streamed;
    ASSERT_EQ(got.size(), want.size());
    for (int k = 0; k < kBatches; ++k) {
      EXPECT_EQ(got[k].step, k + 1);
      EXPECT_NEAR(got[k].loss, want[k].loss, 1e-6f) << k;
      EXPECT_NEAR(got[k].grad_norm, want[k].grad_norm, 1e-5f) << k;
      EXPECT_EQ(got[k].batches_held, read_ahead && k + 1 < kBatches ? 2 : 1) << k;
    }
    // Every batch is the same size: a batch kept past its step would grow the pool.
    for (int k = 2; k + 1 < kBatches; ++k) EXPECT_EQ(pool[k], pool[2]) << k;
    // The stream's end freed the last batch.
    EXPECT_LT(pool_bytes(), pool.back());
    EXPECT_EQ(runs_->List().at(0).steps, kBatches);
    ASSERT_TRUE(runs_->Abort(s.id).ok());
  }
}

TEST_F(TrainingRunsTest, AStreamEndsWithItsFirstErrorAndTheSessionGoesOn) {
  StartedSession s = Must(runs_->Start("mlp", 0, MlpOptions()));
  int calls = 0;
  const MlpBatch good = MakeMlpBatch(8);
  auto source = [&]() -> absl::StatusOr<std::optional<engine::HostBatch>> {
    engine::HostBatch b = good.inputs;
    if (++calls == 2) b[0].name = "inptu";
    b.push_back(good.labels);
    return std::optional<engine::HostBatch>(std::move(b));
  };
  int results = 0;
  const absl::Status status = runs_->Stream(s.id, source, nullptr, [&](const StepResult&) {
    ++results;
    return true;
  });
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_NE(status.message().find("inptu"), absl::string_view::npos) << status;
  EXPECT_EQ(results, 1);
  EXPECT_EQ(Must(runs_->Step(s.id, good.inputs, good.labels)).step, 2);
  EXPECT_TRUE(absl::IsNotFound(
      runs_->Stream("nope", source, nullptr, [](const StepResult&) { return true; })));

  // A session aborted while its stream runs ends the stream with NOT_FOUND.
  calls = 0;
  auto aborting = [&]() -> absl::StatusOr<std::optional<engine::HostBatch>> {
    if (++calls == 3) EXPECT_TRUE(runs_->Abort(s.id).ok());
    engine::HostBatch b = good.inputs;
    b.push_back(good.labels);
    return std::optional<engine::HostBatch>(std::move(b));
  };
  const absl::Status aborted =
      runs_->Stream(s.id, aborting, nullptr, [](const StepResult&) { return true; });
  EXPECT_TRUE(absl::IsNotFound(aborted)) << aborted;
}

// A served recurrent model trained through a session with truncated_bptt_steps, its
// batches streamed like the Train RPC's: the PyTorch losses with detach() at the same
// boundaries, and the loss falls as the session goes on.
TEST_F(TrainingRunsTest, ARecurrentSessionTrainsWithTruncatedBptt) {
  const std::string folder = std::string(NDSERVE_TRAIN_FIXTURES) + "/recurrent_sgd";
  fs::create_directories(repo_ / "lstm/1");
  fs::copy_file(folder + "/model.onnx", repo_ / "lstm/1/model.onnx");
  {
    std::ofstream config(repo_ / "lstm/config.pbtxt");
    config << "name: \"lstm\"\nplatform: \"onnxruntime_onnx\"\nmax_batch_size: 0\n";
  }
  ASSERT_TRUE(engine_->LoadModel("lstm").ok());
  const auto data = ReadTrainFixture(folder);
  const std::vector<float> want = Floats(data.at("losses").bytes);
  StartedSession s = Must(runs_->Start("lstm", 0, testing_util::RecurrentSgdOptions()));
  EXPECT_EQ(s.parameters.size(), 5u);

  constexpr int kSteps = 200;
  int pulled = 0;
  auto source = [&]() -> absl::StatusOr<std::optional<engine::HostBatch>> {
    if (pulled == kSteps) return std::optional<engine::HostBatch>();
    const int k = pulled++ % 5;
    const FixtureTensor& x = data.at(absl::StrCat("batch", k, ".x"));
    const FixtureTensor& y = data.at(absl::StrCat("batch", k, ".y"));
    return std::optional<engine::HostBatch>(
        engine::HostBatch{{"x", DType::kFp32, x.dims, x.bytes},
                          {"y", DType::kFp32, {x.dims[0] * x.dims[1], 1}, y.bytes}});
  };
  std::vector<float> losses;
  ASSERT_TRUE(runs_
                  ->Stream(s.id, source, nullptr,
                           [&](const StepResult& r) {
                             losses.push_back(r.loss);
                             return true;
                           })
                  .ok());
  ASSERT_EQ(losses.size(), static_cast<std::size_t>(kSteps));
  for (int k = 0; k < 5; ++k) EXPECT_NEAR(losses[k], want[k], 1e-5f) << "step " << k + 1;
  float first = 0, last = 0;
  for (int k = 0; k < 5; ++k) {
    first += losses[k];
    last += losses[kSteps - 5 + k];
  }
  EXPECT_LT(last, 0.8f * first);

  // A feed-forward model has no state to carry.
  TrainingRunOptions mlp = MlpOptions();
  mlp.truncated_bptt_steps = 2;
  const absl::Status refused = runs_->Start("mlp", 0, mlp).status();
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_NE(refused.message().find("LSTM"), absl::string_view::npos) << refused;
}

TEST_F(TrainingRunsTest, UnknownSessionsAreNotFoundAndSessionsAreBounded) {
  const MlpBatch batch = MakeMlpBatch(5);
  EXPECT_TRUE(absl::IsNotFound(runs_->Step("nope", batch.inputs, batch.labels).status()));
  EXPECT_TRUE(absl::IsNotFound(runs_->Abort("nope")));
  EXPECT_TRUE(absl::IsNotFound(runs_->Start("nomodel", 0, MlpOptions()).status()));
  StartedSession a = Must(runs_->Start("mlp", 0, MlpOptions()));
  StartedSession b = Must(runs_->Start("mlp", 0, MlpOptions()));
  EXPECT_TRUE(absl::IsResourceExhausted(runs_->Start("mlp", 0, MlpOptions()).status()));
  TrainingRunOptions bad = MlpOptions();
  bad.target_output = "nowhere";
  ASSERT_TRUE(runs_->Abort(b.id).ok());
  // A failed start keeps no session.
  EXPECT_TRUE(absl::IsInvalidArgument(runs_->Start("mlp", 0, bad).status()));
  EXPECT_EQ(runs_->List().size(), 1u);
  EXPECT_TRUE(absl::IsNotFound(runs_->Step(b.id, batch.inputs, batch.labels).status()));
  EXPECT_TRUE(runs_->Step(a.id, batch.inputs, batch.labels).ok());
}

TEST_F(TrainingRunsTest, IdleSessionsExpireAndGiveTheirMemoryBack) {
  const std::uint64_t before = Must(memory_.GetPool(Device::Cpu()))->Stats().allocated_bytes;
  StartedSession s = Must(runs_->Start("mlp", 0, MlpOptions()));
  const MlpBatch batch = MakeMlpBatch(6);
  ASSERT_TRUE(runs_->Step(s.id, batch.inputs, batch.labels).ok());
  EXPECT_EQ(runs_->ExpireIdle(), 0);
  now_ += absl::Hours(1);
  EXPECT_EQ(runs_->ExpireIdle(), 1);
  EXPECT_TRUE(runs_->List().empty());
  EXPECT_TRUE(absl::IsNotFound(runs_->Step(s.id, batch.inputs, batch.labels).status()));
  EXPECT_EQ(Must(memory_.GetPool(Device::Cpu()))->Stats().allocated_bytes, before);
}

TEST_F(TrainingRunsTest, AFailedCommitLeavesTheSessionOpen) {
  // Under a `specific` version policy a restart would not load the new version, so
  // PublishVersion refuses it.
  {
    std::ofstream config(repo_ / "mlp/config.pbtxt", std::ios::app);
    config << "version_policy { specific { versions: 1 } }\n";
  }
  ASSERT_TRUE(engine_->LoadModel("mlp").ok());
  StartedSession s = Must(runs_->Start("mlp", 0, MlpOptions()));
  const MlpBatch batch = MakeMlpBatch(7);
  ASSERT_TRUE(runs_->Step(s.id, batch.inputs, batch.labels).ok());
  const absl::Status failed = runs_->Commit(s.id).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(failed)) << failed;
  EXPECT_FALSE(fs::exists(repo_ / "mlp/2"));
  ASSERT_EQ(runs_->List().size(), 1u);
  EXPECT_EQ(Must(runs_->Step(s.id, batch.inputs, batch.labels)).step, 2);
}

}  // namespace
}  // namespace ndserve::train
