// The pool's RESOURCE_EXHAUSTED reaches the caller of a load or a request unchanged, and
// the engine recovers. Runs in a re-executed child process (threadsafe death-test style)
// so that the memory system can be configured with a small limit before anything
// allocates.

#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/served_model.h"
#include "gtest/gtest.h"
#include "memory/memory_config.h"
#include "memory/memory_system.h"
#include "tests/unit/engine/engine_test_util.h"

namespace ndserve::engine {
namespace {

using testing::SourceDir;

// Returns the number of failed checks (printed to stderr).
int RunUnderSmallLimit() {
  int failures = 0;
  auto check = [&](bool ok, const std::string& what) {
    if (!ok) {
      ++failures;
      std::cerr << "FAILED: " << what << "\n";
    }
  };
  MemoryConfig config;
  config.limit.unlimited = false;
  config.limit.bytes = 16 << 20;
  absl::Status configured = ConfigureMemory(config);
  check(configured.ok(), std::string(configured.message()));
  Pool* pool = *GlobalPool(Device::Cpu());

  // recsys's 49 MiB of embedding tables do not fit under 16 MiB: a load error.
  ModelLoadSpec spec;
  spec.name = "recsys";
  spec.model_path = (SourceDir() / "examples/models/recsys/1/model.onnx").string();
  absl::Status load = ServedModel::Load(spec).status();
  check(load.code() == absl::StatusCode::kResourceExhausted, "recsys load: " + load.ToString());
  check(load.message().find("uploading initializer 'emb") != absl::string_view::npos,
        "the error names the initializer: " + load.ToString());
  check(pool->Stats().allocated_bytes == 0, "nothing stays allocated after the failed load");

  // mlp fits; a 25.6 MB request does not, a small one still runs afterwards.
  testing::TempDir dir;
  std::filesystem::create_directories(dir.path() / "mlp/1");
  std::filesystem::copy_file(SourceDir() / "examples/models/mlp/1/model.onnx",
                             dir.path() / "mlp/1/model.onnx");
  testing::WriteFile(dir.path() / "mlp/config.pbtxt", "max_batch_size: 1000000");
  EngineOptions options;
  options.model_repository = dir.path().string();
  Engine engine(options);
  check(engine.LoadModel("mlp").ok(), "mlp loads");
  const uint64_t baseline = pool->Stats().allocated_bytes;
  for (int64_t batch : {int64_t{100000}, int64_t{1}}) {
    std::vector<uint8_t> bytes(batch * 64 * 4, 0);
    InferenceRequest r;
    r.model_name = "mlp";
    r.inputs.push_back({"input", DType::kFp32, {batch, 64}, absl::MakeConstSpan(bytes)});
    absl::Status s = engine.Infer(r).status();
    if (batch > 1) {
      check(s.code() == absl::StatusCode::kResourceExhausted, "big request: " + s.ToString());
    } else {
      check(s.ok(), "small request after the OOM: " + s.ToString());
    }
    check(pool->Stats().allocated_bytes == baseline, "the request's memory went back");
  }
  check(pool->Stats().oom_count >= 2, "the pool counted the OOMs");
  return failures;
}

TEST(OutOfMemoryTest, PoolExhaustionIsResourceExhaustedAndTheEngineRecovers) {
  NDSERVE_REQUIRE_RECSYS();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(_exit(RunUnderSmallLimit()), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace ndserve::engine
