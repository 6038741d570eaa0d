// PredictorContext as the kernels' ScratchAllocator: working space comes from the
// request's context manager (accounted, aligned, bounded by the pool) and is gone once
// the context closes.

#include "engine/predictor_context.h"

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/graph.h"
#include "engine/model.h"
#include "gtest/gtest.h"
#include "kernels/dispatch.h"
#include "memory/memory_system.h"
#include "memory/nd_manager.h"

namespace ndserve::engine {
namespace {

// x FP32[2,3] -> Relu -> y, on the CPU.
// The memory every model of this test lives in; it outlives them all.
MemorySystem* Memory() {
  static MemorySystem* const memory = new MemorySystem();
  return memory;
}

std::shared_ptr<Model> ReluModel() {
  GraphDef def;
  def.name = "relu";
  def.opset = 17;
  def.inputs.push_back({"x", DType::kFp32, {2, 3}});
  def.outputs.push_back({"y", DType::kFp32, {2, 3}});
  def.nodes.push_back({"relu", "Relu", "", {"x"}, {"y"}, {}});
  absl::StatusOr<Graph> graph = Graph::Build(std::move(def));
  EXPECT_TRUE(graph.ok()) << graph.status();
  ModelSignature sig;
  sig.inputs.assign(graph->inputs().begin(), graph->inputs().end());
  sig.outputs.assign(graph->outputs().begin(), graph->outputs().end());
  absl::StatusOr<std::shared_ptr<Model>> model =
      Model::Create("relu", 1, *std::move(graph), sig, ModelConfig(), Device::Cpu(), Memory());
  EXPECT_TRUE(model.ok()) << model.status();
  return model.value_or(nullptr);
}

class ScratchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = ReluModel();
    ASSERT_NE(model_, nullptr);
    absl::StatusOr<kernels::KernelFn> relu =
        kernels::Lookup(kernels::OpKind::kRelu, Device::Cpu());
    ASSERT_TRUE(relu.ok());
    kernels_.push_back(*relu);
    context_.device = Device::Cpu();
    absl::StatusOr<std::shared_ptr<NDManager>> manager =
        model_->manager()->NewSubManager(ManagerLevel::kContext, "ctx/scratch-test");
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = *manager;
  }

  std::shared_ptr<Model> model_;
  std::vector<kernels::KernelFn> kernels_;
  kernels::KernelContext context_ = kernels::KernelContext::Cpu();
  std::shared_ptr<NDManager> manager_;
};

TEST_F(ScratchTest, BlocksLiveInTheContextManagerAndGoAtClose) {
  PredictorContext ctx(*model_, kernels_, context_, nullptr, manager_);
  const uint64_t before = manager_->bytes();
  absl::StatusOr<void*> a = ctx.scratch().Allocate(1000);
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<void*> b = ctx.scratch().Allocate(3);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NE(*a, *b);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*a) % 256, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*b) % 256, 0u);
  EXPECT_GE(manager_->bytes(), before + 1003);
  EXPECT_GE(ctx.peak_bytes(), before + 1003);
  // The memory is usable.
  static_cast<uint8_t*>(*a)[999] = 7;
  ASSERT_TRUE(ctx.Close().ok());
  EXPECT_TRUE(manager_->closed());
}

TEST_F(ScratchTest, RunReleasesTheBlocksOfANodeOnTheCpu) {
  PredictorContext ctx(*model_, kernels_, context_, nullptr, manager_);
  ASSERT_TRUE(ctx.scratch().Allocate(1 << 16).ok());
  const uint64_t with_block = manager_->bytes();
  ASSERT_TRUE(ctx.SetZeroInput(0, {2, 3}).ok());
  ASSERT_TRUE(ctx.Run().ok());
  // What was taken before the (only) node ran went back after it; the input and output
  // remain.
  EXPECT_LT(manager_->bytes(), with_block);
  ASSERT_TRUE(ctx.Close().ok());
}

TEST_F(ScratchTest, AnImpossibleSizeIsResourceExhausted) {
  PredictorContext ctx(*model_, kernels_, context_, nullptr, manager_);
  absl::StatusOr<void*> huge = ctx.scratch().Allocate(SIZE_MAX);
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted) << huge.status();
  absl::StatusOr<void*> big = ctx.scratch().Allocate(uint64_t{1} << 52);
  EXPECT_FALSE(big.ok());
  ASSERT_TRUE(ctx.Close().ok());
}

}  // namespace
}  // namespace ndserve::engine
