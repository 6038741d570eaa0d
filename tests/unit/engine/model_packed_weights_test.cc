// Model::Create on the CPU packs the weights of the nodes whose CPU kernels read them
// packed (kernels/cpu/packed_weights.h): a one-group Conv's W as the A side, a MatMul's
// initializer B as the B side; other nodes, and weights that are computed rather than
// initializers, get none.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/graph.h"
#include "engine/model.h"
#include "gtest/gtest.h"
#include "memory/memory_system.h"

namespace ndserve::engine {
namespace {

MemorySystem* TestMemory() {
  static MemorySystem* memory = new MemorySystem();
  return memory;
}

Initializer Floats(std::string name, kernels::Shape shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(n, 0.5f);
  return {std::move(name), DType::kFp32, std::move(shape),
          std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float))};
}

TEST(ModelPackedWeightsTest, ConvAndMatMulWeightsArePackedAtLoad) {
  // x [1,3,5,5] -> Conv(W [4,3,3,3]) -> Relu -> MatMul(B [3,2]) -> MatMul(by itself) -> y
  GraphDef def;
  def.name = "packed";
  def.opset = 17;
  def.inputs.push_back({"x", DType::kFp32, {1, 3, 5, 5}});
  def.outputs.push_back({"y", DType::kFp32, {1, 4, 3, 2}});
  def.initializers.push_back(Floats("w", {4, 3, 3, 3}));
  def.initializers.push_back(Floats("b", {3, 2}));
  def.nodes.push_back({"conv", "Conv", "", {"x", "w"}, {"c"}, {}});
  def.nodes.push_back({"relu", "Relu", "", {"c"}, {"r"}, {}});
  def.nodes.push_back({"proj", "MatMul", "", {"r", "b"}, {"p"}, {}});
  def.nodes.push_back({"square", "Mul", "", {"p", "p"}, {"y"}, {}});
  absl::StatusOr<Graph> graph = Graph::Build(std::move(def));
  ASSERT_TRUE(graph.ok()) << graph.status();
  ModelSignature sig;
  sig.inputs.assign(graph->inputs().begin(), graph->inputs().end());
  sig.outputs.assign(graph->outputs().begin(), graph->outputs().end());
  absl::StatusOr<std::shared_ptr<Model>> model =
      Model::Create("packed", 1, *std::move(graph), sig, ModelConfig(), Device::Cpu(), TestMemory());
  ASSERT_TRUE(model.ok()) << model.status();
  const Model& m = **model;
  ASSERT_EQ(m.graph().nodes().size(), 4u);
  uint64_t bytes = 0;
  for (int n = 0; n < 4; ++n) {
    const std::string& name = m.graph().nodes()[n].name;
    const kernels::cpu::PackedMatrix* w = m.packed_weight(n);
    if (name == "conv") {
      ASSERT_NE(w, nullptr);
      EXPECT_EQ(w->side(), kernels::cpu::PackedMatrix::Side::kA);
      EXPECT_EQ(w->rows(), 4);
      EXPECT_EQ(w->cols(), 27);
      bytes += w->bytes();
    } else if (name == "proj") {
      ASSERT_NE(w, nullptr);
      EXPECT_EQ(w->side(), kernels::cpu::PackedMatrix::Side::kB);
      EXPECT_EQ(w->rows(), 3);
      EXPECT_EQ(w->cols(), 2);
      bytes += w->bytes();
    } else {
      EXPECT_EQ(w, nullptr) << name;
    }
  }
  EXPECT_EQ(m.packed_weight_bytes(), bytes);
  EXPECT_GT(bytes, 0u);
}

}  // namespace
}  // namespace ndserve::engine
