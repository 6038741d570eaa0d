// The trainer and batch scopes of a training session (engine/training_scopes.h) in the
// ndserve_manager_* families the daemon exports, as a scrape reads them.
#include <memory>
#include <string>

#include "engine/training_scopes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/memory_system.h"
#include "server/memory_collector.h"
#include "server/metrics_exporter.h"

namespace ndserve {
namespace {

using ::testing::HasSubstr;

TEST(TrainingLevelsMetricsTest, TrainerAndBatchScopesAndTheirCapViolationsAreExported) {
  MemorySystem memory;
  absl::StatusOr<std::shared_ptr<NDManager>> model =
      memory.NewBaseManager(Device::Cpu(), ManagerLevel::kModel, "model/m:1");
  ASSERT_TRUE(model.ok());
  absl::StatusOr<std::shared_ptr<engine::TrainerScope>> trainer =
      engine::TrainerScope::Open(*model, "metrics");
  ASSERT_TRUE(trainer.ok());
  ASSERT_TRUE((*trainer)->Zeros({8}, DType::kFp32, "grad").ok());
  absl::StatusOr<engine::TrainingStep> step = (*trainer)->BeginStep();
  ASSERT_TRUE(step.ok());
  ASSERT_TRUE(step->batch()->Create({4}, DType::kFp32, "x").ok());
  ASSERT_TRUE(step->batch()->Create({4}, DType::kFp32, "y").ok());
  // A step's array that tries to stay in the trainer scope.
  EXPECT_FALSE((*trainer)->manager()->Create({4}, DType::kFp32, "leak").ok());

  MetricsExporter exporter(&memory.pools(),
                           [&memory] { return MemoryCollector::NDManagerLevels(memory); });
  const std::string text = exporter.Text();
  EXPECT_THAT(text, HasSubstr("ndserve_manager_live{level=\"trainer\"} 1"));
  EXPECT_THAT(text, HasSubstr("ndserve_manager_live{level=\"batch\"} 1"));
  EXPECT_THAT(text, HasSubstr("ndserve_manager_resources{level=\"trainer\"} 1"));
  EXPECT_THAT(text, HasSubstr("ndserve_manager_resources{level=\"batch\"} 2"));
  EXPECT_THAT(text, HasSubstr("ndserve_manager_cap_violations_total{level=\"trainer\"} 1"));

  ASSERT_TRUE(step->End().ok());
  EXPECT_THAT(exporter.Text(), HasSubstr("ndserve_manager_live{level=\"batch\"} 0"));
}

}  // namespace
}  // namespace ndserve
