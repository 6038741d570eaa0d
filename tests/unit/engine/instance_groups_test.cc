// Instance groups through the engine and ServedModel: predictors on several placements,
// each with its own copy of the parameters (docs/design.md §4, "Instance placement").
// Without a GPU, two placements on the CPU stand in for two GPUs: the code path (one
// Model per placement, predictors indexed across them, every Model closed at unload)
// is the same.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/repository.h"
#include "engine/served_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/cuda_runtime.h"
#include "memory/memory_system.h"
#include "tests/unit/engine/batcher_test_util.h"
#include "tests/unit/engine/engine_test_util.h"

namespace ndserve::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

uint64_t ParameterBytes(const ServedModel& model) {
  uint64_t sum = 0;
  for (const ModelMemoryUsage& u : model.MemoryUsage()) {
    if (u.kind == kMemoryKindParameters) sum += u.bytes;
  }
  return sum;
}

uint64_t CpuAllocated(MemorySystem& memory) {
  absl::StatusOr<Pool*> pool = memory.GetPool(Device::Cpu());
  EXPECT_TRUE(pool.ok()) << pool.status();
  return pool.ok() ? (*pool)->Stats().allocated_bytes : 0;
}

absl::StatusOr<std::shared_ptr<ServedModel>> LoadMlp(MemorySystem* memory,
                                                    std::vector<InstancePlacement> placements) {
  ModelRepository repo((testing::SourceDir() / "examples/models").string());
  absl::StatusOr<RepositoryModel> m = repo.ReadModel("mlp");
  if (!m.ok()) return m.status();
  ModelLoadSpec spec;
  spec.name = "mlp";
  spec.model_path = ModelRepository::ResolveVersion(*m, 0)->model_path;
  spec.config = m->config;
  spec.device = Device::Cuda(7);  // ignored: the placements decide
  spec.placements = std::move(placements);
  return ServedModel::Load(spec, memory);
}

TEST(InstanceGroupsTest, EachPlacementHasItsOwnParametersAndPredictors) {
  MemorySystem memory;
  const uint64_t before = CpuAllocated(memory);
  absl::StatusOr<std::shared_ptr<ServedModel>> one = LoadMlp(&memory, {{Device::Cpu(), 1}});
  ASSERT_TRUE(one.ok()) << one.status();
  const uint64_t single = ParameterBytes(**one);
  ASSERT_GT(single, 0u);
  (*one)->Unload();

  absl::StatusOr<std::shared_ptr<ServedModel>> two =
      LoadMlp(&memory, {{Device::Cpu(), 1}, {Device::Cpu(), 2}});
  ASSERT_TRUE(two.ok()) << two.status();
  ServedModel& model = **two;
  EXPECT_THAT(model.devices(), ElementsAre(Device::Cpu(), Device::Cpu()));
  EXPECT_EQ(model.device(), Device::Cpu());
  ASSERT_EQ(model.predictors().size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(model.predictors().predictors()[i]->index(), static_cast<int>(i));
  }
  // Predictor 0 runs on the first placement's Model, 1 and 2 on the second's.
  const Model* first = &model.predictors().predictors()[0]->model();
  const Model* second = &model.predictors().predictors()[1]->model();
  EXPECT_NE(first, second);
  EXPECT_EQ(&model.predictors().predictors()[2]->model(), second);
  EXPECT_EQ(ParameterBytes(model), 2 * single);

  testing::MlpRequest request(1);
  for (int i = 0; i < 6; ++i) {
    absl::StatusOr<InferenceResponse> r = model.Infer(request.request);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  model.Unload();
  EXPECT_TRUE(model.MemoryUsage().empty());
  EXPECT_EQ(CpuAllocated(memory), before);
}

TEST(InstanceGroupsTest, AFailedPlacementFreesTheOnesBeforeIt) {
  MemorySystem memory;
  const uint64_t before = CpuAllocated(memory);
  // cuda:0 is refused (no device here, or none in this build) after the CPU placement
  // uploaded its parameters and warmed up its predictor.
  absl::StatusOr<std::shared_ptr<ServedModel>> m =
      LoadMlp(&memory, {{Device::Cpu(), 1}, {Device::Cuda(CudaDeviceCount()), 1}});
  EXPECT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("failed to load model 'mlp'"));
  EXPECT_EQ(CpuAllocated(memory), before);
}

EngineOptions Options(const fs::path& repo) {
  EngineOptions o;
  o.model_repository = repo.string();
  return o;
}

void CopyMlp(const fs::path& repo) {
  fs::create_directories(repo / "mlp/1");
  fs::copy_file(testing::SourceDir() / "examples/models/mlp/1/model.onnx",
                repo / "mlp/1/model.onnx", fs::copy_options::overwrite_existing);
}

TEST(InstanceGroupsTest, EngineAddsUpGroupsOnOneDevice) {
  testing::TempDir dir;
  CopyMlp(dir.path());
  testing::WriteFile(dir.path() / "mlp/config.pbtxt",
                     "instance_group [ { count: 2 kind: KIND_CPU }, { count: 1 kind: KIND_AUTO } ]");
  MemorySystem memory;
  Engine engine(Options(dir.path()), &memory);
  ASSERT_TRUE(engine.LoadModel("mlp").ok());
  absl::StatusOr<std::shared_ptr<ServedModel>> m = engine.GetModel("mlp");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT((*m)->devices(), ElementsAre(Device::Cpu()));
  EXPECT_EQ((*m)->predictors().size(), 3u);
}

TEST(InstanceGroupsTest, EngineRefusesGpuGroupsItCannotPlace) {
  testing::TempDir dir;
  CopyMlp(dir.path());
  testing::WriteFile(dir.path() / "mlp/config.pbtxt",
                     "instance_group [ { name: \"g\" count: 1 kind: KIND_GPU gpus: [ 0, 1 ] } ]");
  MemorySystem memory;
  Engine engine(Options(dir.path()), &memory);
  absl::Status s = engine.LoadModel("mlp");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("failed to load model 'mlp': instance_group 'g' is KIND_GPU"));
}

}  // namespace
}  // namespace ndserve::engine
