// Engine: loading from a repository, versions, readiness, metadata, statistics, failed
// loads that leave other models serving, reloads and unloads under load.

#include "engine/engine.h"

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "base/text.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/memory_system.h"
#include "memory/pool.h"
#include "tests/unit/engine/engine_test_util.h"

namespace ndserve::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::SourceDir;
using testing::TempDir;
namespace fs = std::filesystem;

fs::path MlpFile() { return SourceDir() / "examples/models/mlp/1/model.onnx"; }
fs::path OpModel(const char* name) {
  return SourceDir() / "tests/fixtures/ops" / name / "model.onnx";
}

void Copy(const fs::path& from, const fs::path& to) {
  fs::create_directories(to.parent_path());
  fs::copy_file(from, to, fs::copy_options::overwrite_existing);
}

// One mlp request of `batch` rows of zeros.
struct MlpRequest {
  explicit MlpRequest(int64_t batch, int64_t version = 0) : bytes(batch * 64 * 4, 0) {
    request.model_name = "mlp";
    request.model_version = version;
    request.inputs.push_back({"input", DType::kFp32, {batch, 64}, absl::MakeConstSpan(bytes)});
  }
  std::vector<uint8_t> bytes;
  InferenceRequest request;
};

EngineOptions Options(const fs::path& repo) {
  EngineOptions o;
  o.model_repository = repo.string();
  return o;
}

TEST(EngineTest, LoadsTheExamplesAndReportsOnThem) {
  NDSERVE_REQUIRE_RECSYS();
  MemorySystem memory;
  Engine engine(Options(SourceDir() / "examples/models"), &memory);
  ASSERT_TRUE(engine.LoadAllModels().ok());
  EXPECT_TRUE(engine.AllModelsReady());
  EXPECT_TRUE(engine.IsModelReady("mlp"));
  EXPECT_TRUE(engine.IsModelReady("recsys", 1));
  EXPECT_FALSE(engine.IsModelReady("recsys", 2));
  EXPECT_FALSE(engine.IsModelReady("nope"));

  absl::StatusOr<ModelMetadata> md = engine.GetModelMetadata("recsys");
  ASSERT_TRUE(md.ok()) << md.status();
  EXPECT_EQ(md->platform, "onnxruntime_onnx");
  EXPECT_EQ(md->max_batch_size, 64);
  EXPECT_THAT(md->versions, ElementsAre(1));
  ASSERT_EQ(md->inputs.size(), 2u);
  EXPECT_EQ(md->inputs[0].ToString(), "sparse_ids INT64[-1,4,8]");
  EXPECT_EQ(md->inputs[1].ToString(), "dense FP32[-1,13]");
  EXPECT_EQ(md->outputs[0].ToString(), "score FP32[-1,1]");
  absl::StatusOr<ModelConfig> config = engine.GetModelConfig("mlp");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->inputs[0].ToString(), "input FP32[64]");

  std::vector<ModelIndexEntry> index = engine.RepositoryIndex();
  ASSERT_EQ(index.size(), 2u);
  EXPECT_EQ(index[0].name, "mlp");
  EXPECT_EQ(index[0].version, 1);
  EXPECT_EQ(index[0].state, ModelState::kReady);

  MlpRequest r4(4);
  ASSERT_TRUE(engine.Infer(r4.request).ok());
  ASSERT_TRUE(engine.Infer(MlpRequest(2).request).ok());
  EXPECT_FALSE(engine.Infer(MlpRequest(65).request).ok());  // above max_batch_size
  absl::StatusOr<std::vector<ModelStatsSnapshot>> stats = engine.GetStatistics("mlp");
  ASSERT_TRUE(stats.ok());
  ASSERT_EQ(stats->size(), 1u);
  EXPECT_EQ((*stats)[0].success_count, 2u);
  EXPECT_EQ((*stats)[0].inference_count, 6u);
  EXPECT_EQ((*stats)[0].fail_count, 1u);
  EXPECT_EQ((*stats)[0].inflight, 0);
  EXPECT_GT((*stats)[0].last_inference_ms, 0u);
  EXPECT_GT((*stats)[0].compute_infer_ns, 0u);
  EXPECT_EQ(engine.GetStatistics()->size(), 2u);
  EXPECT_EQ(engine.GetStatistics("nope").status().code(), absl::StatusCode::kNotFound);

  ASSERT_TRUE(engine.UnloadModel("mlp").ok());
  EXPECT_FALSE(engine.IsModelReady("mlp"));
  EXPECT_TRUE(engine.AllModelsReady());  // an explicit unload does not make it unready
  EXPECT_EQ(engine.Infer(MlpRequest(1).request).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(engine.UnloadModel("mlp").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(engine.RepositoryIndex(/*ready_only=*/true).size(), 1u);
}

TEST(EngineTest, ServesTheHighestVersionOrTheOneAskedFor) {
  TempDir dir;
  Copy(MlpFile(), dir.path() / "mlp/1/model.onnx");
  Copy(MlpFile(), dir.path() / "mlp/2/model.onnx");
  Copy(MlpFile(), dir.path() / "mlp/3/model.onnx");
  MemorySystem memory;
  Engine engine(Options(dir.path()), &memory);
  // Default policy: only the highest.
  ASSERT_TRUE(engine.LoadModel("mlp").ok());
  EXPECT_THAT(engine.GetModelMetadata("mlp")->versions, ElementsAre(3));
  absl::StatusOr<InferenceResponse> r = engine.Infer(MlpRequest(1).request);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model_version, 3);
  absl::Status missing = engine.Infer(MlpRequest(1, 1).request).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.message()), HasSubstr("has no version 1 loaded (loaded: 3)"));

  // A specific policy: versions 1 and 2; a request picks either.
  testing::WriteFile(dir.path() / "mlp/config.pbtxt",
                     "version_policy { specific { versions: [ 1, 2 ] } }");
  ASSERT_TRUE(engine.LoadModel("mlp").ok());
  EXPECT_THAT(engine.GetModelMetadata("mlp")->versions, ElementsAre(1, 2));
  EXPECT_EQ(engine.Infer(MlpRequest(1).request)->model_version, 2);
  EXPECT_EQ(engine.Infer(MlpRequest(1, 1).request)->model_version, 1);
  EXPECT_EQ(engine.Infer(MlpRequest(1, 3).request).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(engine.GetStatistics("mlp")->size(), 2u);
  EXPECT_EQ(engine.GetStatistics("mlp", 1)->size(), 1u);
  EXPECT_EQ(engine.RepositoryIndex().size(), 2u);

  // Without config.pbtxt the graph's shapes are served as declared, batch dim as -1.
  EXPECT_EQ(engine.GetModelMetadata("mlp")->max_batch_size, 0);
  EXPECT_EQ(engine.GetModelMetadata("mlp")->inputs[0].ToString(), "input FP32[-1,64]");
}

// The shutdown's exit timeout cuts requests through InferenceRequest::cancel: a raised
// flag stops the request before its next node with CANCELLED (counted as failed), and the
// request's memory goes back to the pool; a lowered one changes nothing.
TEST(EngineTest, ACancelledRequestStopsWithCancelled) {
  TempDir dir;
  Copy(MlpFile(), dir.path() / "mlp/1/model.onnx");
  MemorySystem memory;
  Engine engine(Options(dir.path()), &memory);
  ASSERT_TRUE(engine.LoadModel("mlp").ok());
  std::atomic<bool> cancel{false};
  MlpRequest r(2);
  r.request.cancel = &cancel;
  ASSERT_TRUE(engine.Infer(r.request).ok());
  cancel.store(true);
  absl::Status s = engine.Infer(r.request).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(std::string(s.message()), HasSubstr("cancelled before node"));
  absl::StatusOr<std::vector<ModelStatsSnapshot>> stats = engine.GetStatistics("mlp");
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ((*stats)[0].success_count, 1u);
  EXPECT_EQ((*stats)[0].fail_count, 1u);
  EXPECT_EQ((*stats)[0].inflight, 0);
  ASSERT_TRUE(engine.UnloadModel("mlp").ok());
  for (const Pool* pool : memory.AllPools()) EXPECT_EQ(pool->Stats().allocated_bytes, 0u);
}

TEST(EngineTest, ABadModelDoesNotStopTheOthers) {
  TempDir dir;
  Copy(MlpFile(), dir.path() / "mlp/1/model.onnx");
  Copy(SourceDir() / "tests/fixtures/bad/unknown_op.onnx", dir.path() / "broken/1/model.onnx");
  testing::WriteFile(dir.path() / "noconfig/config.pbtxt", "max_batch_size: [");
  MemorySystem memory;
  Engine engine(Options(dir.path()), &memory);
  absl::Status all = engine.LoadAllModels();
  EXPECT_FALSE(all.ok());
  EXPECT_THAT(std::string(all.message()), HasSubstr("failed to load model 'broken' version 1"));
  EXPECT_THAT(std::string(all.message()), HasSubstr("unsupported operator 'Hardmax'"));
  EXPECT_THAT(std::string(all.message()), HasSubstr("noconfig"));
  EXPECT_TRUE(engine.IsModelReady("mlp"));
  EXPECT_TRUE(engine.Infer(MlpRequest(1).request).ok());
  EXPECT_FALSE(engine.IsModelReady("broken"));
  EXPECT_FALSE(engine.AllModelsReady());
  absl::Status s = engine.Infer({"broken"}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr("Hardmax"));
  for (const ModelIndexEntry& e : engine.RepositoryIndex()) {
    if (e.name == "broken") {
      EXPECT_EQ(e.state, ModelState::kUnavailable);
      EXPECT_THAT(e.reason, HasSubstr("Hardmax"));
    }
  }
  EXPECT_EQ(engine.LoadModel("../etc").code(), absl::StatusCode::kInvalidArgument);
  // A model that is not in the repository fails to load but is not listed afterwards.
  const size_t listed = engine.RepositoryIndex().size();
  EXPECT_EQ(engine.LoadModel("absent").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(engine.Infer({"absent"}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(engine.RepositoryIndex().size(), listed);
}

// A config.pbtxt byte that is not UTF-8 used to reach the stored reason verbatim, and
// with it every client's RepositoryIndex reply. The reason is valid UTF-8 now, the other
// models still load, and out-of-range config values fail the load naming the field.
TEST(EngineTest, LoadErrorsAreStoredAsValidUtf8AndRangeChecked) {
  TempDir dir;
  Copy(MlpFile(), dir.path() / "mlp/1/model.onnx");
  Copy(MlpFile(), dir.path() / "binary/1/model.onnx");
  testing::WriteFile(dir.path() / "binary/config.pbtxt",
                     "name: \"binary\"\nplatform: \"\xFF\xFE\"\n");
  Copy(MlpFile(), dir.path() / "greedy/1/model.onnx");
  testing::WriteFile(dir.path() / "greedy/config.pbtxt",
                     "instance_group [ { count: 2147483647 }, { count: 2147483647 } ]");
  MemorySystem memory;
  Engine engine(Options(dir.path()), &memory);
  EXPECT_FALSE(engine.LoadAllModels().ok());
  EXPECT_TRUE(engine.IsModelReady("mlp"));
  int seen = 0;
  for (const ModelIndexEntry& e : engine.RepositoryIndex()) {
    EXPECT_TRUE(IsValidUtf8(e.reason)) << e.name;
    if (e.name == "binary") {
      ++seen;
      EXPECT_EQ(e.state, ModelState::kUnavailable);
      EXPECT_THAT(e.reason, HasSubstr("binary/config.pbtxt"));
    }
    if (e.name == "greedy") {
      ++seen;
      EXPECT_THAT(e.reason, HasSubstr("greedy/config.pbtxt: instance_group count must be from 0 "
                                      "to 1024, not 2147483647"));
    }
  }
  EXPECT_EQ(seen, 2);
  const absl::Status long_name = engine.LoadModel(std::string(100'000, 'm'));
  EXPECT_EQ(long_name.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(long_name.message().size(), 300u);
}

TEST(EngineTest, AFailedReloadKeepsTheOldVersionServing) {
  TempDir dir;
  Copy(MlpFile(), dir.path() / "mlp/1/model.onnx");
  MemorySystem memory;
  Engine engine(Options(dir.path()), &memory);
  ASSERT_TRUE(engine.LoadModel("mlp").ok());
  Copy(SourceDir() / "tests/fixtures/bad/truncated.onnx", dir.path() / "mlp/1/model.onnx");
  EXPECT_FALSE(engine.LoadModel("mlp").ok());
  EXPECT_TRUE(engine.IsModelReady("mlp"));
  EXPECT_TRUE(engine.AllModelsReady());
  EXPECT_TRUE(engine.Infer(MlpRequest(1).request).ok());
}

TEST(EngineTest, ConfigThatContradictsTheModelIsALoadError) {
  TempDir dir;
  Copy(MlpFile(), dir.path() / "mlp/1/model.onnx");
  testing::WriteFile(dir.path() / "mlp/config.pbtxt",
                     "max_batch_size: 8 input [ { name: \"input\" data_type: TYPE_FP64 dims: [ 64 "
                     "] } ]");
  MemorySystem memory;
  Engine engine(Options(dir.path()), &memory);
  absl::Status s = engine.LoadModel("mlp");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("input 'input': config.pbtxt says FP64"));

  testing::WriteFile(dir.path() / "mlp/config.pbtxt",
                     "max_batch_size: 8 input [ { name: \"input\" data_type: TYPE_FP32 dims: [ 65 "
                     "] } ]");
  EXPECT_THAT(std::string(engine.LoadModel("mlp").message()), HasSubstr("do not match"));
  testing::WriteFile(dir.path() / "mlp/config.pbtxt",
                     "output [ { name: \"logits\" data_type: TYPE_FP32 dims: [ 10 ] } ]");
  EXPECT_THAT(std::string(engine.LoadModel("mlp").message()),
              HasSubstr("output 'logits' is not one of the model's outputs"));
  testing::WriteFile(dir.path() / "mlp/config.pbtxt", "instance_group [ { kind: KIND_GPU } ]");
  EXPECT_EQ(engine.LoadModel("mlp").code(), absl::StatusCode::kFailedPrecondition);
  // A model with a fixed first dimension cannot batch.
  Copy(OpModel("relu"), dir.path() / "relu/1/model.onnx");
  testing::WriteFile(dir.path() / "relu/config.pbtxt", "max_batch_size: 4");
  EXPECT_THAT(std::string(engine.LoadModel("relu").message()),
              HasSubstr("no variable first (batch) dimension"));
}

TEST(EngineTest, UnloadWaitsForRequestsInFlight) {
  TempDir dir;
  Copy(MlpFile(), dir.path() / "mlp/1/model.onnx");
  testing::WriteFile(dir.path() / "mlp/config.pbtxt",
                     "max_batch_size: 64 instance_group [ { count: 2 kind: KIND_CPU } ]");
  MemorySystem memory;
  Engine engine(Options(dir.path()), &memory);
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(engine.LoadModel("mlp").ok());
    std::atomic<bool> stop{false};
    std::atomic<int> ok{0}, refused{0}, other{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t) {
      threads.emplace_back([&] {
        MlpRequest r(8);
        while (!stop.load()) {
          absl::Status s = engine.Infer(r.request).status();
          if (s.ok()) {
            ++ok;
          } else if (s.code() == absl::StatusCode::kUnavailable ||
                     s.code() == absl::StatusCode::kNotFound) {
            ++refused;
          } else {
            ++other;
            ADD_FAILURE() << s;
          }
        }
      });
    }
    while (ok.load() < 20) std::this_thread::yield();
    ASSERT_TRUE(engine.UnloadModel("mlp").ok());
    stop = true;
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(other.load(), 0);
    EXPECT_GE(ok.load(), 20);
  }
}

}  // namespace
}  // namespace ndserve::engine
