// Gemm / MatMul epilogue fusion (engine/fusion.h FuseGemmEpilogues): which patterns it
// folds, that the fused graph builds, and that the fused nodes compute what the unfused
// graph did, node by node through the real kernels on every test device (CPU, plus each
// CUDA device present).
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "engine/fusion.h"
#include "engine/graph.h"
#include "gtest/gtest.h"
#include "kernels/node_attrs.h"
#include "kernels/op_attrs.h"
#include "tests/unit/engine/engine_test_util.h"
#include "tests/unit/engine/run_graph_def.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ndserve::engine {
namespace {

using kernels::testing::AllClose;
using kernels::testing::DeviceRunner;
using kernels::testing::HostTensor;
using kernels::testing::RandomFloats;

using ::ndserve::engine::testing::Fp32Init;
using ::ndserve::engine::testing::OpTypes;
using ::ndserve::engine::testing::RunDef;

Initializer Scalar(const std::string& name, float v) { return Fp32Init(name, {}, {v}); }

// x [4,8] -> Gemm(w [6,8] transB, b [6]) -> g -> Relu -> y.
GraphDef GemmRelu() {
  GraphDef def;
  def.name = "gemm_relu";
  def.opset = 13;
  def.inputs.push_back({"x", DType::kFp32, {4, 8}});
  def.outputs.push_back({"y", DType::kFp32, {4, 6}});
  def.initializers.push_back(Fp32Init("w", {6, 8}, RandomFloats(48, 1, -1, 1)));
  def.initializers.push_back(Fp32Init("b", {6}, RandomFloats(6, 2)));
  def.nodes.push_back({"fc", "Gemm", "", {"x", "w", "b"}, {"g"}, {{"transB", int64_t{1}}}});
  def.nodes.push_back({"relu", "Relu", "", {"g"}, {"y"}, {}});
  return def;
}

// x [2,3,8] -> MatMul(w [8,6]) -> m -> Add(bias [6]) -> h -> GELU as PyTorch exports it
// (Div, Erf, Add, Mul(x, 0.5), Mul) -> y.
GraphDef MatMulBiasGelu() {
  GraphDef def;
  def.name = "linear_gelu";
  def.opset = 17;
  def.inputs.push_back({"x", DType::kFp32, {2, 3, 8}});
  def.outputs.push_back({"y", DType::kFp32, {2, 3, 6}});
  def.initializers.push_back(Fp32Init("w", {8, 6}, RandomFloats(48, 3, -1, 1)));
  def.initializers.push_back(Fp32Init("bias", {6}, RandomFloats(6, 4)));
  def.initializers.push_back(Scalar("sqrt2", 1.4142135f));
  def.initializers.push_back(Scalar("one", 1.0f));
  def.initializers.push_back(Scalar("half", 0.5f));
  def.nodes.push_back({"mm", "MatMul", "", {"x", "w"}, {"m"}, {}});
  def.nodes.push_back({"add", "Add", "", {"bias", "m"}, {"h"}, {}});
  def.nodes.push_back({"div", "Div", "", {"h", "sqrt2"}, {"d"}, {}});
  def.nodes.push_back({"erf", "Erf", "", {"d"}, {"e"}, {}});
  def.nodes.push_back({"add1", "Add", "", {"e", "one"}, {"e1"}, {}});
  def.nodes.push_back({"halfx", "Mul", "", {"h", "half"}, {"hx"}, {}});
  def.nodes.push_back({"mul", "Mul", "", {"hx", "e1"}, {"y"}, {}});
  return def;
}

// x [5,8] -> Gemm(w [8,6], c [6]) -> g -> Clip(min -0.5, max 0.75) -> y.
GraphDef GemmClip() {
  GraphDef def;
  def.name = "gemm_clip";
  def.opset = 13;
  def.inputs.push_back({"x", DType::kFp32, {5, 8}});
  def.outputs.push_back({"y", DType::kFp32, {5, 6}});
  def.initializers.push_back(Fp32Init("w", {8, 6}, RandomFloats(48, 5, -1, 1)));
  def.initializers.push_back(Fp32Init("c", {6}, RandomFloats(6, 6)));
  def.initializers.push_back(Scalar("lo", -0.5f));
  def.initializers.push_back(Scalar("hi", 0.75f));
  def.nodes.push_back({"fc", "Gemm", "", {"x", "w", "c"}, {"g"}, {}});
  def.nodes.push_back({"clip", "Clip", "", {"g", "lo", "hi"}, {"y"}, {}});
  return def;
}

void ExpectFusedMatchesUnfused(const GraphDef& original, const GraphDef& fused,
                               const HostTensor& x) {
  for (Device device : kernels::testing::TestDevices()) {
    SCOPED_TRACE(device.ToString());
    absl::StatusOr<HostTensor> want = RunDef(original, device, {x});
    ASSERT_TRUE(want.ok()) << want.status();
    absl::StatusOr<HostTensor> got = RunDef(fused, device, {x});
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(AllClose(*got, *want, 1e-6, 1e-6));
  }
}

TEST(FuseGemmEpiloguesTest, GemmAndRelu) {
  const GraphDef original = GemmRelu();
  GraphDef def = original;
  absl::StatusOr<int> fused = FuseGemmEpilogues(&def);
  ASSERT_TRUE(fused.ok()) << fused.status();
  EXPECT_EQ(*fused, 1);
  EXPECT_EQ(OpTypes(def), std::vector<std::string>{"Gemm"});
  EXPECT_EQ(def.nodes[0].outputs, std::vector<std::string>{"y"});
  ASSERT_TRUE(Graph::Build(def).ok());
  // Inputs on both sides of 0, so the Relu has something to clamp.
  ExpectFusedMatchesUnfused(original, def, kernels::testing::RandomTensor({4, 8}, 7));
}

TEST(FuseGemmEpiloguesTest, MatMulBiasAndGelu) {
  const GraphDef original = MatMulBiasGelu();
  GraphDef def = original;
  absl::StatusOr<int> fused = FuseGemmEpilogues(&def);
  ASSERT_TRUE(fused.ok()) << fused.status();
  EXPECT_EQ(*fused, 6);  // the Add of the bias and the five GELU nodes
  EXPECT_EQ(OpTypes(def), std::vector<std::string>{"MatMul"});
  const NodeDef& mm = def.nodes[0];
  EXPECT_EQ(mm.inputs, (std::vector<std::string>{"x", "w", "bias"}));
  EXPECT_EQ(mm.outputs, std::vector<std::string>{"y"});
  absl::StatusOr<Graph> graph = Graph::Build(def);
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(graph->nodes().size(), 1u);
  ExpectFusedMatchesUnfused(original, def, kernels::testing::RandomTensor({2, 3, 8}, 8));
}

TEST(FuseGemmEpiloguesTest, GemmAndClip) {
  const GraphDef original = GemmClip();
  GraphDef def = original;
  EXPECT_EQ(*FuseGemmEpilogues(&def), 1);
  EXPECT_EQ(OpTypes(def), std::vector<std::string>{"Gemm"});
  ASSERT_TRUE(Graph::Build(def).ok());
  ExpectFusedMatchesUnfused(original, def, kernels::testing::RandomTensor({5, 8}, 9));
}

// q [b, h, s, d] -> MatMul(kt [b, h, d, s]) -> scores -> Div(sqrt(d) scalar) -> y:
// attention's scaled scores.
GraphDef ScaledScores(const kernels::Shape& q, const kernels::Shape& kt) {
  GraphDef def;
  def.name = "scaled_scores";
  def.opset = 17;
  def.inputs.push_back({"q", DType::kFp32, {q.begin(), q.end()}});
  def.inputs.push_back({"kt", DType::kFp32, {kt.begin(), kt.end()}});
  def.outputs.push_back({"y", DType::kFp32, {q[0], q[1], q[2], kt[3]}});
  def.initializers.push_back(Scalar("sqrt_d", std::sqrt(static_cast<float>(q[3]))));
  def.nodes.push_back({"scores", "MatMul", "", {"q", "kt"}, {"s"}, {}});
  def.nodes.push_back({"scale", "Div", "", {"s", "sqrt_d"}, {"y"}, {}});
  return def;
}

// Heads and a sequence that are no multiple of 8, one query row, and a product large
// enough for the unblocked path (the CPU scales the small ones block by block).
TEST(FuseGemmEpiloguesTest, ScoresAndTheirScaling) {
  struct Case {
    kernels::Shape q, kt;
  };
  for (const Case& c : {Case{{1, 3, 37, 5}, {1, 3, 5, 37}}, Case{{2, 1, 1, 24}, {2, 1, 24, 1}},
                        Case{{1, 1, 128, 72}, {1, 1, 72, 128}}}) {
    const GraphDef original = ScaledScores(c.q, c.kt);
    GraphDef def = original;
    EXPECT_EQ(*FuseGemmEpilogues(&def), 1);
    EXPECT_EQ(OpTypes(def), std::vector<std::string>{"MatMul"});
    ASSERT_TRUE(Graph::Build(def).ok());
    const HostTensor q = kernels::testing::RandomTensor(c.q, 10);
    const HostTensor kt = kernels::testing::RandomTensor(c.kt, 11);
    for (Device device : kernels::testing::TestDevices()) {
      SCOPED_TRACE(device.ToString());
      absl::StatusOr<HostTensor> want = RunDef(original, device, {q, kt});
      ASSERT_TRUE(want.ok()) << want.status();
      absl::StatusOr<HostTensor> got = RunDef(def, device, {q, kt});
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_TRUE(AllClose(*got, *want, 1e-6, 1e-6)) << kernels::ShapeToString(c.q);
    }
  }
  {  // a divisor of shape [1], not a scalar: left as it is
    GraphDef def = ScaledScores({1, 2, 8, 4}, {1, 2, 4, 8});
    def.initializers[0] = Fp32Init("sqrt_d", {1}, {2.0f});
    EXPECT_EQ(*FuseGemmEpilogues(&def), 0);
  }
  {  // the product is the divisor
    GraphDef def = ScaledScores({1, 2, 8, 4}, {1, 2, 4, 8});
    def.nodes[1].inputs = {"sqrt_d", "s"};
    EXPECT_EQ(*FuseGemmEpilogues(&def), 0);
  }
}

TEST(FuseGemmEpiloguesTest, LeavesWhatItCannotFoldExactly) {
  {  // the product is also a graph output
    GraphDef def = GemmRelu();
    def.outputs.push_back({"g", DType::kFp32, {4, 6}});
    EXPECT_EQ(*FuseGemmEpilogues(&def), 0);
    EXPECT_EQ(def.nodes.size(), 2u);
  }
  {  // the product has a second reader
    GraphDef def = GemmRelu();
    def.outputs.push_back({"s", DType::kFp32, {4, 6}});
    def.nodes.push_back({"sig", "Sigmoid", "", {"g"}, {"s"}, {}});
    EXPECT_EQ(*FuseGemmEpilogues(&def), 0);
  }
  {  // a bias that is not one value per column ([3, 6] over a [2, 3, 6] product)
    GraphDef def = MatMulBiasGelu();
    def.initializers[1] = Fp32Init("bias", {3, 6}, RandomFloats(18, 4));
    absl::StatusOr<int> fused = FuseGemmEpilogues(&def);
    ASSERT_TRUE(fused.ok());
    EXPECT_EQ(def.nodes[0].inputs.size(), 2u);
    EXPECT_EQ(def.nodes[1].op_type, "Add");
  }
  {  // a bias computed at run time
    GraphDef def = MatMulBiasGelu();
    def.inputs.push_back({"bias_in", DType::kFp32, {6}});
    def.nodes[1].inputs[0] = "bias_in";
    FuseGemmEpilogues(&def).IgnoreError();
    EXPECT_EQ(def.nodes[0].inputs.size(), 2u);
  }
  {  // a GELU-like chain with another constant shape (not a scalar): left unfused
    GraphDef def = MatMulBiasGelu();
    def.initializers[2] = Fp32Init("sqrt2", {6}, std::vector<float>(6, 1.4142135f));
    EXPECT_EQ(*FuseGemmEpilogues(&def), 1);  // the bias only
    EXPECT_EQ(def.nodes.size(), 6u);
  }
  {  // Clip with a bound fed at run time
    GraphDef def = GemmClip();
    def.inputs.push_back({"hi_in", DType::kFp32, {}});
    def.nodes[1].inputs[2] = "hi_in";
    EXPECT_EQ(*FuseGemmEpilogues(&def), 0);
  }
}

TEST(FuseGemmEpiloguesTest, FusedAttributesAreCheckedByTheRules) {
  kernels::AttrMap attrs{{kernels::kFusedActivationAttr, std::string("Swish")}};
  EXPECT_EQ(kernels::BuildOpAttrs(kernels::OpKind::kGemm, 13, attrs).status().code(),
            absl::StatusCode::kInvalidArgument);
  attrs = {{kernels::kFusedActivationAttr, std::string("Div")}};  // no divisor
  EXPECT_EQ(kernels::BuildOpAttrs(kernels::OpKind::kMatMul, 13, attrs).status().code(),
            absl::StatusCode::kInvalidArgument);
  attrs = {{kernels::kFusedActivationAttr, std::string("Clip")},
           {kernels::kFusedActivationParamsAttr, std::vector<float>{1.0f}}};
  EXPECT_EQ(kernels::BuildOpAttrs(kernels::OpKind::kGemm, 13, attrs).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A MatMul with a fused bias checks the bias is one value per output column.
  absl::StatusOr<kernels::OpAttrs> mm = kernels::BuildOpAttrs(
      kernels::OpKind::kMatMul, 13, {{kernels::kFusedMatMulBiasAttr, int64_t{1}}});
  ASSERT_TRUE(mm.ok()) << mm.status();
  const kernels::TensorDesc a{DType::kFp32, {2, 4}}, b{DType::kFp32, {4, 3}};
  EXPECT_TRUE(kernels::InferOutputs(kernels::OpKind::kMatMul,
                                    {a, b, kernels::TensorDesc{DType::kFp32, {3}}}, *mm)
                  .ok());
  EXPECT_EQ(kernels::InferOutputs(kernels::OpKind::kMatMul,
                                  {a, b, kernels::TensorDesc{DType::kFp32, {2}}}, *mm)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(kernels::InferOutputs(kernels::OpKind::kMatMul, {a, b}, *mm).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ndserve::engine
