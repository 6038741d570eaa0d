// Engine::PublishVersion (docs/design.md §4.1): new parameter values become the model's
// next version, written to the repository and switched to atomically while clients keep
// sending; the old version finishes what it took, unloads and gives its memory back.
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/training_sessions.h"
#include "gtest/gtest.h"
#include "memory/memory_system.h"
#include "tests/unit/engine/engine_test_util.h"

namespace ndserve::engine {
namespace {

using testing::SourceDir;
using testing::TempDir;
namespace fs = std::filesystem;

constexpr int kClasses = 10;

HostTensor Fp32(const std::string& name, std::vector<std::int64_t> shape,
                const std::vector<float>& v) {
  HostTensor t{name, DType::kFp32, std::move(shape), {}};
  t.bytes.resize(v.size() * 4);
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

// The new last layer: no weights, a bias that favours class 0, so the new version's
// output for any input is softmax(bias).
std::vector<HostTensor> NewLastLayer() {
  std::vector<float> bias(kClasses, 0.0f);
  bias[0] = 3.0f;
  return {Fp32("fc2.weight", {kClasses, 64}, std::vector<float>(kClasses * 64, 0.0f)),
          Fp32("fc2.bias", {kClasses}, bias)};
}

std::vector<float> NewOutput() {
  std::vector<float> p(kClasses);
  const float e3 = std::exp(3.0f);
  for (int i = 0; i < kClasses; ++i) p[i] = (i == 0 ? e3 : 1.0f) / (e3 + kClasses - 1);
  return p;
}

std::vector<float> Floats(const InferenceResponse& r) {
  std::vector<float> v(r.outputs.at(0).data.size() / 4);
  std::memcpy(v.data(), r.outputs[0].data.data(), v.size() * 4);
  return v;
}

bool Near(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::abs(a[i] - b[i]) > 1e-5f) return false;
  }
  return true;
}

class PublishVersionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path mlp = SourceDir() / "examples/models/mlp";
    fs::create_directories(repo_.path() / "mlp/1");
    fs::copy_file(mlp / "config.pbtxt", repo_.path() / "mlp/config.pbtxt");
    fs::copy_file(mlp / "1/model.onnx", repo_.path() / "mlp/1/model.onnx");
    EngineOptions options;
    options.model_repository = repo_.path().string();
    engine_ = std::make_unique<Engine>(options, &memory_);
    ASSERT_TRUE(engine_->LoadModel("mlp").ok());
  }

  std::uint64_t PoolBytes() {
    absl::StatusOr<Pool*> pool = memory_.GetPool(Device::Cpu());
    return pool.ok() ? (*pool)->Stats().allocated_bytes : 0;
  }

  TempDir repo_;
  MemorySystem memory_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(PublishVersionTest, SixtyFourClientsSeeNoFailureAndSwitchToTheNewVersion) {
  std::vector<uint8_t> input(64 * 4, 0);
  InferenceRequest request;
  request.model_name = "mlp";
  request.inputs.push_back({"input", DType::kFp32, {1, 64}, absl::MakeConstSpan(input)});
  absl::StatusOr<InferenceResponse> first = engine_->Infer(request);
  ASSERT_TRUE(first.ok()) << first.status();
  const std::vector<float> old_output = Floats(*first);
  const std::vector<float> new_output = NewOutput();
  ASSERT_FALSE(Near(old_output, new_output));
  const std::uint64_t bytes_before = PoolBytes();
  std::weak_ptr<ServedModel> old_version = *engine_->GetModel("mlp");

  constexpr int kClients = 64;
  std::atomic<bool> stop{false};
  std::atomic<int> started{0}, on_new{0}, failures{0}, wrong{0}, went_back{0};
  std::atomic<int64_t> old_answers{0}, new_answers{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      bool counted = false, seen_new = false;
      while (!stop.load()) {
        absl::StatusOr<InferenceResponse> r = engine_->Infer(request);
        if (!r.ok()) {
          ++failures;
          ADD_FAILURE() << r.status();
          continue;
        }
        const bool is_new = r->model_version == 2;
        if (!Near(Floats(*r), is_new ? new_output : old_output)) ++wrong;
        if (seen_new && !is_new) ++went_back;
        (is_new ? new_answers : old_answers)++;
        if (is_new && !seen_new) {
          seen_new = true;
          ++on_new;
        }
        if (!counted) {
          counted = true;
          ++started;
        }
      }
    });
  }
  while (started.load() < kClients) std::this_thread::yield();

  absl::StatusOr<int64_t> version = engine_->PublishVersion("mlp", NewLastLayer());
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, 2);
  // Publish returns once the old version retired: nobody holds it any more.
  EXPECT_TRUE(old_version.expired());
  while (on_new.load() < kClients) std::this_thread::yield();
  stop = true;
  for (std::thread& t : clients) t.join();

  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(went_back.load(), 0);
  EXPECT_GT(old_answers.load(), 0);
  EXPECT_GT(new_answers.load(), 0);
  // The old version's memory went back: the new one is the same size.
  EXPECT_EQ(PoolBytes(), bytes_before);
  absl::StatusOr<ModelMetadata> md = engine_->GetModelMetadata("mlp");
  ASSERT_TRUE(md.ok());
  EXPECT_EQ(md->versions, std::vector<int64_t>{2});
  EXPECT_TRUE(fs::exists(repo_.path() / "mlp/2/model.onnx"));
}

TEST_F(PublishVersionTest, ThePublishedVersionIsWhatARestartLoads) {
  ASSERT_TRUE(engine_->PublishVersion("mlp", NewLastLayer()).ok());
  engine_.reset();
  EngineOptions options;
  options.model_repository = repo_.path().string();
  Engine restarted(options, &memory_);
  ASSERT_TRUE(restarted.LoadModel("mlp").ok());
  std::vector<uint8_t> input(64 * 4, 0);
  InferenceRequest request;
  request.model_name = "mlp";
  request.inputs.push_back({"input", DType::kFp32, {1, 64}, absl::MakeConstSpan(input)});
  absl::StatusOr<InferenceResponse> r = restarted.Infer(request);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model_version, 2);
  EXPECT_TRUE(Near(Floats(*r), NewOutput()));
}

TEST_F(PublishVersionTest, BadValuesLeaveTheOldVersionServingAndNoDirectory) {
  std::vector<HostTensor> bad = NewLastLayer();
  bad[1].shape = {kClasses + 1};
  absl::StatusOr<int64_t> v = engine_->PublishVersion("mlp", bad);
  ASSERT_FALSE(v.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(v.status())) << v.status();
  EXPECT_NE(v.status().message().find("'mlp'"), std::string::npos) << v.status();
  EXPECT_FALSE(fs::exists(repo_.path() / "mlp/2"));
  EXPECT_TRUE(engine_->IsModelReady("mlp", 1));
  EXPECT_TRUE(absl::IsNotFound(engine_->PublishVersion("nope", NewLastLayer()).status()));
  // The next good publish takes the number the failed one did not use.
  absl::StatusOr<int64_t> good = engine_->PublishVersion("mlp", NewLastLayer());
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(*good, 2);
}

// The engine side of a training session's commit: a session trains a copy of a
// parameter of the served version in its trainer scope, the result is published, and
// the retired version takes the session's scope with it (the session does not hold the
// old version up).
TEST_F(PublishVersionTest, ASessionsTrainedCopyIsPublishedAndRetiringFreesTheSession) {
  std::shared_ptr<ServedModel> v1 = *engine_->GetModel("mlp");
  int bias_index = -1;
  for (int i = 0; i < static_cast<int>(v1->model().graph().initializers().size()); ++i) {
    if (v1->model().graph().initializers()[i].name == "fc2.bias") bias_index = i;
  }
  ASSERT_GE(bias_index, 0);
  TrainingSessions::Options options;
  TrainingSessions sessions(options);
  absl::StatusOr<std::shared_ptr<TrainingSession>> session =
      sessions.Start("mlp", v1->version(), v1->model().manager());
  ASSERT_TRUE(session.ok()) << session.status();
  TrainerScope& trainer = (*session)->trainer();
  absl::StatusOr<NDArray> bias = trainer.CopyOf(v1->model().initializer(bias_index));
  ASSERT_TRUE(bias.ok()) << bias.status();
  {
    absl::StatusOr<TrainingStep> step = trainer.BeginStep();
    ASSERT_TRUE(step.ok());
    // The "update": what a real optimizer step would write in place.
    float* b = *bias->DataAs<float>();
    for (int i = 0; i < kClasses; ++i) b[i] = i == 0 ? 3.0f : 0.0f;
  }
  absl::StatusOr<std::vector<uint8_t>> trained = bias->ToHost();
  ASSERT_TRUE(trained.ok());
  std::vector<HostTensor> values = NewLastLayer();
  values[1].bytes = *trained;
  v1.reset();
  ASSERT_TRUE(engine_->PublishVersion("mlp", values).ok());
  // Version 1 retired, and its scope tree with the session's trainer scope in it.
  EXPECT_TRUE(trainer.manager()->closed());
  EXPECT_EQ(memory_.LevelCounts()[ManagerLevel::kTrainer].live_managers, 0);

  std::vector<uint8_t> input(64 * 4, 0);
  InferenceRequest request;
  request.model_name = "mlp";
  request.inputs.push_back({"input", DType::kFp32, {1, 64}, absl::MakeConstSpan(input)});
  absl::StatusOr<InferenceResponse> r = engine_->Infer(request);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model_version, 2);
  EXPECT_TRUE(Near(Floats(*r), NewOutput()));
}

}  // namespace
}  // namespace ndserve::engine
