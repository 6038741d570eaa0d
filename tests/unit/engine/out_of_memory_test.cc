// The pool's RESOURCE_EXHAUSTED reaches the caller of a load or a request unchanged, and
// the engine recovers. The limit is a setting of the test's own memory system, so this
// runs in-process next to every other test.

#include <filesystem>
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

MemoryConfig LimitedTo(std::uint64_t bytes) {
  MemoryConfig config;
  config.limit.unlimited = false;
  config.limit.bytes = bytes;
  return config;
}

TEST(OutOfMemoryTest, PoolExhaustionIsResourceExhaustedAndTheEngineRecovers) {
  NDSERVE_REQUIRE_RECSYS();
  MemorySystem memory(LimitedTo(16 << 20));
  absl::StatusOr<Pool*> cpu = memory.GetPool(Device::Cpu());
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  Pool* pool = *cpu;

  // recsys's 49 MiB of embedding tables do not fit under 16 MiB: a load error.
  ModelLoadSpec spec;
  spec.name = "recsys";
  spec.model_path = (SourceDir() / "examples/models/recsys/1/model.onnx").string();
  absl::Status load = ServedModel::Load(spec, &memory).status();
  EXPECT_EQ(load.code(), absl::StatusCode::kResourceExhausted) << load;
  EXPECT_NE(load.message().find("uploading initializer 'emb"), absl::string_view::npos) << load;
  EXPECT_EQ(pool->Stats().allocated_bytes, 0u) << "nothing stays allocated after the failed load";

  // mlp fits; a 25.6 MB request does not, a small one still runs afterwards.
  testing::TempDir dir;
  std::filesystem::create_directories(dir.path() / "mlp/1");
  std::filesystem::copy_file(SourceDir() / "examples/models/mlp/1/model.onnx",
                             dir.path() / "mlp/1/model.onnx");
  testing::WriteFile(dir.path() / "mlp/config.pbtxt", "max_batch_size: 1000000");
  EngineOptions options;
  options.model_repository = dir.path().string();
  Engine engine(options, &memory);
  ASSERT_TRUE(engine.LoadModel("mlp").ok());
  const uint64_t baseline = pool->Stats().allocated_bytes;
  for (int64_t batch : {int64_t{100000}, int64_t{1}}) {
    std::vector<uint8_t> bytes(batch * 64 * 4, 0);
    InferenceRequest r;
    r.model_name = "mlp";
    r.inputs.push_back({"input", DType::kFp32, {batch, 64}, absl::MakeConstSpan(bytes)});
    absl::Status s = engine.Infer(r).status();
    if (batch > 1) {
      EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << "big request: " << s;
    } else {
      EXPECT_TRUE(s.ok()) << "small request after the OOM: " << s;
    }
    EXPECT_EQ(pool->Stats().allocated_bytes, baseline) << "the request's memory went back";
  }
  EXPECT_GE(pool->Stats().oom_count, 2u) << "the pool counted the OOMs";
}

}  // namespace
}  // namespace ndserve::engine
