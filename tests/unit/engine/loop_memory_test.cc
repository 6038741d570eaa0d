// A Loop's memory (docs/design.md §4, PredictorContext::RunLoop): each iteration frees
// what it made and nothing carries on, so the context's peak does not grow with the trip
// count, while what the nodes made in all does.
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "engine/graph.h"
#include "engine/model.h"
#include "engine/predictor_context.h"
#include "gtest/gtest.h"
#include "kernels/dispatch.h"
#include "memory/memory_system.h"
#include "memory/nd_manager.h"

namespace ndserve::engine {
namespace {

MemorySystem* TestMemory() {
  static MemorySystem* memory = new MemorySystem();
  return memory;
}

constexpr int64_t kSide = 128;  // x is FP32[128, 128]: 64 KiB

Initializer Scalar(const std::string& name, DType dtype, const void* v, size_t bytes) {
  Initializer init;
  init.name = name;
  init.dtype = dtype;
  init.bytes.assign(static_cast<const char*>(v), bytes);
  return init;
}

// h = x; for i in range(n): h = tanh(h + x * 0.5) -> y, with the Loop as the loader
// leaves it (graph.h LoopDef): two temporaries and one carried value per iteration.
std::shared_ptr<Model> TanhLoopModel() {
  GraphDef def;
  def.name = "tanh_loop";
  def.opset = 17;
  def.inputs.push_back({"x", DType::kFp32, {kSide, kSide}});
  def.inputs.push_back({"n", DType::kInt64, {}});
  def.outputs.push_back({"y", DType::kFp32, {kSide, kSide}});
  const float half = 0.5f;
  const uint8_t yes = 1;
  def.initializers.push_back(Scalar("half", DType::kFp32, &half, sizeof(half)));
  def.initializers.push_back(Scalar("yes", DType::kBool, &yes, 1));
  def.loops.push_back(LoopDef{0, "L/i", "L/c", {"L/h"}});
  auto body = [&](const char* name, const char* op, std::vector<std::string> in,
                  const char* out) {
    NodeDef n{name, op, "", std::move(in), {out}, {}};
    n.loop = 0;
    def.nodes.push_back(std::move(n));
  };
  body("L/scale", "Mul", {"x", "half"}, "L/t1");
  body("L/add", "Add", {"L/h", "L/t1"}, "L/t2");
  body("L/tanh", "Tanh", {"L/t2"}, "L/h_out");
  NodeDef loop{"L", "Loop", "", {"n", "yes", "x", "yes", "L/h_out", "x", "half"}, {"y"}, {}};
  loop.attrs[kLoopIdAttr] = int64_t{0};
  loop.attrs[kLoopCarriedAttr] = int64_t{1};
  for (const char* a : {kScanAxesAttr, kScanNewAxisAttr, kScanDTypesAttr, kScanDimsAttr}) {
    loop.attrs[a] = std::vector<int64_t>{};
  }
  def.nodes.push_back(std::move(loop));
  absl::StatusOr<Graph> graph = Graph::Build(std::move(def));
  EXPECT_TRUE(graph.ok()) << graph.status();
  if (!graph.ok()) return nullptr;
  ModelSignature sig;
  sig.inputs.assign(graph->inputs().begin(), graph->inputs().end());
  sig.outputs.assign(graph->outputs().begin(), graph->outputs().end());
  absl::StatusOr<std::shared_ptr<Model>> model = Model::Create(
      "tanh_loop", 1, *std::move(graph), sig, ModelConfig(), Device::Cpu(), TestMemory());
  EXPECT_TRUE(model.ok()) << model.status();
  return model.value_or(nullptr);
}

struct LoopRun {
  uint64_t peak = 0;
  uint64_t made = 0;
  std::vector<float> y;
};

LoopRun RunWith(const Model& model, int64_t n, const std::vector<float>& x) {
  std::vector<kernels::KernelFn> kernels;
  for (const Node& node : model.graph().nodes()) {
    absl::StatusOr<kernels::KernelFn> fn = kernels::Lookup(node.op, Device::Cpu());
    kernels.push_back(fn.ok() ? *fn : nullptr);  // the Loop has none
  }
  absl::StatusOr<std::shared_ptr<NDManager>> manager =
      model.manager()->NewSubManager(ManagerLevel::kContext, "ctx/loop-memory-test");
  EXPECT_TRUE(manager.ok()) << manager.status();
  LoopRun out;
  if (!manager.ok()) return out;
  PredictorContext ctx(model, kernels, kernels::KernelContext::Cpu(), nullptr, *manager);
  const int64_t shape[] = {kSide, kSide};
  EXPECT_TRUE(ctx.SetInput(0, shape, absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(x.data()),
                                                         x.size() * sizeof(float)))
                  .ok());
  EXPECT_TRUE(
      ctx.SetInput(1, {}, absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(&n), sizeof(n)))
          .ok());
  absl::Status ran = ctx.Run();
  EXPECT_TRUE(ran.ok()) << ran;
  absl::StatusOr<InferOutputTensor> y = ctx.CopyOutput(0);
  EXPECT_TRUE(y.ok()) << y.status();
  if (y.ok()) {
    out.y.resize(y->data.size() / sizeof(float));
    std::memcpy(out.y.data(), y->data.data(), y->data.size());
  }
  out.peak = ctx.peak_bytes();
  out.made = ctx.output_bytes();
  EXPECT_TRUE(ctx.Close().ok());
  return out;
}

TEST(LoopMemoryTest, ThePeakDoesNotGrowWithTheTripCount) {
  std::shared_ptr<Model> model = TanhLoopModel();
  ASSERT_NE(model, nullptr);
  std::vector<float> x(kSide * kSide);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 17) / 17.0f - 0.5f;
  const LoopRun two = RunWith(*model, 2, x);
  const LoopRun many = RunWith(*model, 40, x);
  const uint64_t array = kSide * kSide * sizeof(float);
  // 40 iterations made 120 arrays of 64 KiB...
  EXPECT_GE(many.made, 120 * array);
  // ...but held no more at once than 2 did: the input, the carried value, one
  // iteration's temporaries and the output.
  EXPECT_LE(many.peak, two.peak + array / 2) << "2 trips: " << two.peak << ", 40: " << many.peak;
  EXPECT_LE(many.peak, 8 * array);
  // And the values are the loop's.
  ASSERT_EQ(many.y.size(), x.size());
  for (size_t i = 0; i < x.size(); i += 997) {
    float h = x[i];
    for (int t = 0; t < 40; ++t) h = std::tanh(h + x[i] * 0.5f);
    EXPECT_NEAR(many.y[i], h, 1e-5) << i;
  }
}

TEST(LoopMemoryTest, NoIterationHandsOnACopyOfTheInitialValue) {
  std::shared_ptr<Model> model = TanhLoopModel();
  ASSERT_NE(model, nullptr);
  std::vector<float> x(kSide * kSide, 0.25f);
  const LoopRun zero = RunWith(*model, 0, x);
  ASSERT_EQ(zero.y.size(), x.size());
  EXPECT_EQ(zero.y, x);
}

}  // namespace
}  // namespace ndserve::engine
