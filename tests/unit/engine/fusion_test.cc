// The load-time fusions (engine/fusion.h). Conv + BatchNormalization folding and
// Conv + activation fusion: which pairs each fuses, that the fused graph builds without
// the second node, and that the fused Conv computes what the pair did (both run through
// the CPU kernels; tests/torch/torch_model_test.cc does the same on whole exports).
#include "engine/fusion.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/conv_activation.h"
#include "tests/unit/engine/engine_test_util.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ndserve::engine {
namespace {

using kernels::testing::AllClose;
using kernels::testing::DeviceRunner;
using kernels::testing::HostTensor;
using kernels::testing::RandomFloats;

using ::ndserve::engine::testing::Fp32Init;

HostTensor ToHost(const Initializer& init) {
  HostTensor t{init.dtype, init.shape, std::vector<uint8_t>(init.bytes.size())};
  std::memcpy(t.bytes.data(), init.bytes.data(), init.bytes.size());
  return t;
}

const Initializer* FindInit(const GraphDef& def, const std::string& name) {
  for (const Initializer& i : def.initializers) {
    if (i.name == name) return &i;
  }
  return nullptr;
}

// x [1,3,6,6] -> Conv(w [4,3,3,3], b [4], pads 1) -> c -> BatchNormalization -> y.
GraphDef ConvBn(bool conv_bias) {
  GraphDef def;
  def.name = "conv_bn";
  def.opset = 15;
  def.inputs.push_back({"x", DType::kFp32, {1, 3, 6, 6}});
  def.outputs.push_back({"y", DType::kFp32, {1, 4, 6, 6}});
  def.initializers.push_back(Fp32Init("w", {4, 3, 3, 3}, RandomFloats(108, 1, -1, 1)));
  def.initializers.push_back(Fp32Init("b", {4}, RandomFloats(4, 2)));
  def.initializers.push_back(Fp32Init("scale", {4}, RandomFloats(4, 3)));
  def.initializers.push_back(Fp32Init("shift", {4}, RandomFloats(4, 4)));
  def.initializers.push_back(Fp32Init("mean", {4}, RandomFloats(4, 5)));
  def.initializers.push_back(Fp32Init("var", {4}, RandomFloats(4, 6, 0.1f, 2.0f)));
  std::vector<std::string> conv_in = {"x", "w"};
  if (conv_bias) conv_in.push_back("b");
  kernels::AttrMap conv_attrs{{"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  def.nodes.push_back({"conv", "Conv", "", conv_in, {"c"}, conv_attrs});
  def.nodes.push_back({"bn",
                       "BatchNormalization",
                       "",
                       {"c", "scale", "shift", "mean", "var"},
                       {"y"},
                       {{"epsilon", 1e-3f}}});
  return def;
}

TEST(FuseConvBatchNormTest, FoldsTheBatchNormIntoTheConv) {
  for (bool conv_bias : {true, false}) {
    const GraphDef original = ConvBn(conv_bias);
    GraphDef def = original;
    absl::StatusOr<int> fused = FuseConvBatchNorm(&def);
    ASSERT_TRUE(fused.ok()) << fused.status();
    EXPECT_EQ(*fused, 1);
    ASSERT_EQ(def.nodes.size(), 1u);
    for (const NodeDef& n : def.nodes) EXPECT_NE(n.op_type, "BatchNormalization");
    const NodeDef& conv = def.nodes[0];
    EXPECT_EQ(conv.op_type, "Conv");
    EXPECT_EQ(conv.outputs, std::vector<std::string>{"y"});
    ASSERT_EQ(conv.inputs.size(), 3u);
    absl::StatusOr<Graph> graph = Graph::Build(def);
    ASSERT_TRUE(graph.ok()) << graph.status();
    EXPECT_EQ(graph->nodes().size(), 1u);

    // Same output as the unfused pair, through the real kernels.
    DeviceRunner runner(Device::Cpu());
    const HostTensor x = kernels::testing::RandomTensor({1, 3, 6, 6}, 7);
    absl::StatusOr<kernels::OpAttrs> conv_attrs =
        kernels::BuildOpAttrs(kernels::OpKind::kConv, 15, original.nodes[0].attrs);
    absl::StatusOr<kernels::OpAttrs> bn_attrs =
        kernels::BuildOpAttrs(kernels::OpKind::kBatchNormalization, 15, original.nodes[1].attrs);
    ASSERT_TRUE(conv_attrs.ok() && bn_attrs.ok());
    std::vector<HostTensor> conv_in = {x, ToHost(*FindInit(original, "w"))};
    if (conv_bias) conv_in.push_back(ToHost(*FindInit(original, "b")));
    auto c = runner.Run(kernels::OpKind::kConv, conv_in, *conv_attrs);
    ASSERT_TRUE(c.ok()) << c.status();
    std::vector<HostTensor> bn_in = {(*c)[0]};
    for (const char* p : {"scale", "shift", "mean", "var"}) {
      bn_in.push_back(ToHost(*FindInit(original, p)));
    }
    auto want = runner.Run(kernels::OpKind::kBatchNormalization, bn_in, *bn_attrs);
    ASSERT_TRUE(want.ok()) << want.status();
    const Initializer* fw = FindInit(def, conv.inputs[1]);
    const Initializer* fb = FindInit(def, conv.inputs[2]);
    ASSERT_TRUE(fw != nullptr && fb != nullptr);
    auto got = runner.Run(kernels::OpKind::kConv, {x, ToHost(*fw), ToHost(*fb)}, *conv_attrs);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(AllClose((*got)[0], (*want)[0], 1e-5, 1e-4));
  }
}

TEST(FuseConvBatchNormTest, LeavesPairsItCannotFoldExactly) {
  {  // the conv output is read by another node too
    GraphDef def = ConvBn(true);
    def.outputs.push_back({"r", DType::kFp32, {1, 4, 6, 6}});
    def.nodes.push_back({"relu", "Relu", "", {"c"}, {"r"}, {}});
    EXPECT_EQ(*FuseConvBatchNorm(&def), 0);
    EXPECT_EQ(def.nodes.size(), 3u);
  }
  {  // the conv output is a graph output
    GraphDef def = ConvBn(true);
    def.outputs.push_back({"c", DType::kFp32, {1, 4, 6, 6}});
    EXPECT_EQ(*FuseConvBatchNorm(&def), 0);
  }
  {  // training mode
    GraphDef def = ConvBn(true);
    def.nodes[1].attrs["training_mode"] = int64_t{1};
    EXPECT_EQ(*FuseConvBatchNorm(&def), 0);
  }
  {  // statistics fed at run time, not constants
    GraphDef def = ConvBn(true);
    def.inputs.push_back({"mean_in", DType::kFp32, {4}});
    def.nodes[1].inputs[3] = "mean_in";
    EXPECT_EQ(*FuseConvBatchNorm(&def), 0);
  }
  {  // BN after something other than a Conv
    GraphDef def = ConvBn(true);
    def.nodes[0].op_type = "Relu";
    def.nodes[0].inputs = {"x"};
    def.nodes[0].attrs.clear();
    EXPECT_EQ(*FuseConvBatchNorm(&def), 0);
  }
}

// x [1,c,7,7] -> Conv(w, b, pads 1, stride `stride`, group `group`) -> c -> act -> y, with
// Clip's bounds as initializers "lo" and "hi" when given.
GraphDef ConvAct(const std::string& act, int64_t channels, int64_t group, int64_t stride, int64_t k,
                 bool with_bounds) {
  GraphDef def;
  def.name = "conv_act";
  def.opset = 15;
  const int64_t out_channels = 2 * channels;
  const int64_t out = (7 + 2 * (k / 2) - k) / stride + 1;
  def.inputs.push_back({"x", DType::kFp32, {1, channels, 7, 7}});
  def.outputs.push_back({"y", DType::kFp32, {1, out_channels, out, out}});
  const int64_t cg = channels / group;
  def.initializers.push_back(
      Fp32Init("w", {out_channels, cg, k, k}, RandomFloats(out_channels * cg * k * k, 11, -1, 1)));
  def.initializers.push_back(Fp32Init("b", {out_channels}, RandomFloats(out_channels, 12)));
  kernels::AttrMap attrs{{"group", group}, {"strides", std::vector<int64_t>{stride, stride}}};
  if (k > 1) attrs["pads"] = std::vector<int64_t>{k / 2, k / 2, k / 2, k / 2};
  def.nodes.push_back({"conv", "Conv", "", {"x", "w", "b"}, {"c"}, attrs});
  std::vector<std::string> act_in = {"c"};
  if (with_bounds) {
    def.initializers.push_back(Fp32Init("lo", {}, {-0.25f}));
    def.initializers.push_back(Fp32Init("hi", {}, {0.5f}));
    act_in = {"c", "lo", "hi"};
  }
  def.nodes.push_back({"act", act, "", act_in, {"y"}, {}});
  return def;
}

// `original` after FuseConvActivation, which must have fused one activation into its Conv
// and left that Conv alone, writing "y".
GraphDef FusedToOneConv(const GraphDef& original) {
  GraphDef def = original;
  absl::StatusOr<int> fused = FuseConvActivation(&def);
  EXPECT_TRUE(fused.ok()) << fused.status();
  if (fused.ok()) EXPECT_EQ(*fused, 1);
  EXPECT_EQ(def.nodes.size(), 1u);
  if (!def.nodes.empty()) {
    EXPECT_EQ(def.nodes[0].op_type, "Conv");
    EXPECT_EQ(def.nodes[0].outputs, std::vector<std::string>{"y"});
  }
  return def;
}

// Runs a one-Conv graph's Conv (with the node's attributes) on the CPU kernels.
absl::StatusOr<std::vector<HostTensor>> RunConv(const GraphDef& def, const NodeDef& conv,
                                                const HostTensor& x) {
  absl::StatusOr<kernels::OpAttrs> attrs =
      kernels::BuildOpAttrs(kernels::OpKind::kConv, def.opset, conv.attrs);
  if (!attrs.ok()) return attrs.status();
  DeviceRunner runner(Device::Cpu());
  return runner.Run(
      kernels::OpKind::kConv,
      {x, ToHost(*FindInit(def, conv.inputs[1])), ToHost(*FindInit(def, conv.inputs[2]))}, *attrs);
}

TEST(FuseConvActivationTest, FusedConvMatchesConvThenActivation) {
  struct Case {
    std::string act;
    int64_t channels, group, stride, k;
    bool bounds;
  };
  const std::vector<Case> cases = {
      {"Relu", 3, 1, 1, 3, false},       // im2col + GEMM
      {"Clip", 4, 1, 2, 3, true},        // strided, Clip(-0.25, 0.5) from initializers
      {"Clip", 4, 1, 1, 1, false},       // 1x1: GEMM straight on X; Clip without bounds
      {"Clip", 6, 6, 1, 3, true},        // depthwise, stride 1
      {"Relu", 6, 6, 2, 3, false},       // depthwise, stride 2
      {"HardSwish", 4, 2, 1, 3, false},  // grouped, not depthwise
      {"Sigmoid", 3, 1, 1, 3, false},
  };
  for (const Case& tc : cases) {
    SCOPED_TRACE(
        absl::StrCat(tc.act, " c", tc.channels, " g", tc.group, " s", tc.stride, " k", tc.k));
    const GraphDef original = ConvAct(tc.act, tc.channels, tc.group, tc.stride, tc.k, tc.bounds);
    const GraphDef def = FusedToOneConv(original);
    ASSERT_EQ(def.nodes.size(), 1u);
    const NodeDef& conv = def.nodes[0];
    absl::StatusOr<Graph> graph = Graph::Build(def);
    ASSERT_TRUE(graph.ok()) << graph.status();
    EXPECT_EQ(graph->nodes().size(), 1u);

    // Conv then the activation as their own kernels, against the one fused Conv.
    const HostTensor x = kernels::testing::RandomTensor({1, tc.channels, 7, 7}, 13);
    auto c = RunConv(original, original.nodes[0], x);
    ASSERT_TRUE(c.ok()) << c.status();
    // Clip's bounds reach its rules as host values, as the graph builder hands them over.
    std::vector<std::optional<kernels::HostValue>> bounds(3);
    if (tc.bounds) {
      for (int i : {1, 2}) {
        const Initializer& b = *FindInit(original, i == 1 ? "lo" : "hi");
        absl::StatusOr<kernels::HostValue> v = kernels::HostValue::FromBytes(
            b.dtype, b.shape,
            absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(b.bytes.data()), b.bytes.size()));
        ASSERT_TRUE(v.ok()) << v.status();
        bounds[i] = *v;
      }
    }
    absl::StatusOr<kernels::OpKind> kind = kernels::OpKindFromOnnx(tc.act);
    ASSERT_TRUE(kind.ok()) << kind.status();
    absl::StatusOr<kernels::OpAttrs> act_attrs = kernels::BuildOpAttrs(
        *kind, original.opset, original.nodes[1].attrs, kernels::HostInputs(std::move(bounds)));
    ASSERT_TRUE(act_attrs.ok()) << act_attrs.status();
    DeviceRunner runner(Device::Cpu());
    auto want = runner.Run(*kind, {(*c)[0]}, *act_attrs);
    ASSERT_TRUE(want.ok()) << want.status();
    auto got = RunConv(def, conv, x);
    ASSERT_TRUE(got.ok()) << got.status();
    // The same functors on the same conv values: equal, not merely close.
    EXPECT_TRUE(AllClose((*got)[0], (*want)[0], 0, 0));
    // And the activation did something (an unbounded Clip is the identity).
    if (tc.act != "Clip" || tc.bounds) EXPECT_FALSE(AllClose((*got)[0], (*c)[0], 1e-6, 0));
  }
}

// ConvAct's graph with SiLU as PyTorch exports it: s = Sigmoid(c), y = Mul(c, s), or
// Mul(s, c) when `sigmoid_first`.
GraphDef ConvSilu(int64_t channels, int64_t group, int64_t stride, int64_t k, bool sigmoid_first) {
  GraphDef def = ConvAct("Sigmoid", channels, group, stride, k, false);
  def.nodes[1].outputs = {"s"};
  const std::vector<std::string> in =
      sigmoid_first ? std::vector<std::string>{"s", "c"} : std::vector<std::string>{"c", "s"};
  def.nodes.push_back({"mul", "Mul", "", in, {"y"}, {}});
  return def;
}

// On every CPU conv path the SiLU can meet (im2col + GEMM, strided, 1x1, depthwise at
// stride 1 and 2, grouped): one Conv node left, whose output equals Conv, Sigmoid and Mul
// run as their own kernels to the bit.
TEST(FuseConvActivationTest, FusesSiluAndMatchesConvSigmoidMulExactly) {
  struct Case {
    int64_t channels, group, stride, k;
  };
  int i = 0;
  for (const Case& tc : {Case{3, 1, 1, 3}, Case{4, 1, 2, 3}, Case{4, 1, 1, 1}, Case{6, 6, 1, 3},
                         Case{6, 6, 2, 3}, Case{4, 2, 1, 3}}) {
    const bool sigmoid_first = ++i % 2 == 0;
    SCOPED_TRACE(absl::StrCat("c", tc.channels, " g", tc.group, " s", tc.stride, " k", tc.k,
                              sigmoid_first ? " Mul(s, c)" : " Mul(c, s)"));
    const GraphDef original = ConvSilu(tc.channels, tc.group, tc.stride, tc.k, sigmoid_first);
    const GraphDef def = FusedToOneConv(original);
    ASSERT_EQ(def.nodes.size(), 1u);
    const NodeDef& conv = def.nodes[0];
    EXPECT_EQ(std::get<std::string>(conv.attrs.at(kernels::kConvActivationAttr)), "Silu");
    ASSERT_TRUE(Graph::Build(def).ok());

    const HostTensor x = kernels::testing::RandomTensor({1, tc.channels, 7, 7}, 17);
    auto c = RunConv(original, original.nodes[0], x);
    ASSERT_TRUE(c.ok()) << c.status();
    DeviceRunner runner(Device::Cpu());
    auto s = runner.Run(kernels::OpKind::kSigmoid, {(*c)[0]}, kernels::NoAttrs{});
    ASSERT_TRUE(s.ok()) << s.status();
    auto want = runner.Run(kernels::OpKind::kMul,
                           sigmoid_first ? std::vector<HostTensor>{(*s)[0], (*c)[0]}
                                         : std::vector<HostTensor>{(*c)[0], (*s)[0]},
                           kernels::NoAttrs{});
    ASSERT_TRUE(want.ok()) << want.status();
    auto got = RunConv(def, conv, x);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(AllClose((*got)[0], (*want)[0], 0, 0));
  }
}

TEST(FuseConvActivationTest, LeavesSiluPairsItCannotFuse) {
  {  // the conv output is read by a third node
    GraphDef def = ConvSilu(3, 1, 1, 3, false);
    def.outputs.push_back({"r", DType::kFp32, {1, 6, 7, 7}});
    def.nodes.push_back({"relu", "Relu", "", {"c"}, {"r"}, {}});
    EXPECT_EQ(*FuseConvActivation(&def), 0);
    EXPECT_EQ(def.nodes.size(), 4u);
  }
  {  // Mul of the Sigmoid and another value: the Sigmoid alone cannot fuse either (the
     // conv output has two readers)
    GraphDef def = ConvSilu(3, 1, 1, 3, false);
    def.inputs.push_back({"z", DType::kFp32, {1, 6, 7, 7}});
    def.nodes[2].inputs = {"z", "s"};
    def.nodes.push_back({"relu", "Relu", "", {"c"}, {"r"}, {}});
    def.nodes[3].outputs = {"r"};
    def.outputs.push_back({"r", DType::kFp32, {1, 6, 7, 7}});
    EXPECT_EQ(*FuseConvActivation(&def), 0);
  }
  {  // the Sigmoid's output is a graph output too
    GraphDef def = ConvSilu(3, 1, 1, 3, true);
    def.outputs.push_back({"s", DType::kFp32, {1, 6, 7, 7}});
    EXPECT_EQ(*FuseConvActivation(&def), 0);
  }
}

TEST(FuseConvActivationTest, LeavesPairsItCannotFuseExactly) {
  {  // the conv output is read by another node too
    GraphDef def = ConvAct("Relu", 3, 1, 1, 3, false);
    def.outputs.push_back({"s", DType::kFp32, {1, 6, 7, 7}});
    def.nodes.push_back({"sig", "Sigmoid", "", {"c"}, {"s"}, {}});
    EXPECT_EQ(*FuseConvActivation(&def), 0);
    EXPECT_EQ(def.nodes.size(), 3u);
  }
  {  // the conv output is a graph output
    GraphDef def = ConvAct("Relu", 3, 1, 1, 3, false);
    def.outputs.push_back({"c", DType::kFp32, {1, 6, 7, 7}});
    EXPECT_EQ(*FuseConvActivation(&def), 0);
  }
  {  // Clip bounds fed at run time, not constants
    GraphDef def = ConvAct("Clip", 3, 1, 1, 3, true);
    def.inputs.push_back({"lo_in", DType::kFp32, {}});
    def.nodes[1].inputs[1] = "lo_in";
    EXPECT_EQ(*FuseConvActivation(&def), 0);
  }
  {  // an activation after something other than a Conv
    GraphDef def = ConvAct("Relu", 3, 1, 1, 3, false);
    def.nodes[0].op_type = "ConvTranspose";
    EXPECT_EQ(*FuseConvActivation(&def), 0);
  }
  {  // an activation it has no epilogue for
    GraphDef def = ConvAct("Tanh", 3, 1, 1, 3, false);
    EXPECT_EQ(*FuseConvActivation(&def), 0);
  }
  {  // two activations in a row: only the first joins the conv
    GraphDef def = ConvAct("Relu", 3, 1, 1, 3, false);
    def.nodes[1].outputs = {"r"};
    def.nodes.push_back({"act2", "Sigmoid", "", {"r"}, {"y"}, {}});
    EXPECT_EQ(*FuseConvActivation(&def), 1);
    ASSERT_EQ(def.nodes.size(), 2u);
    EXPECT_EQ(def.nodes[1].op_type, "Sigmoid");
    EXPECT_TRUE(Graph::Build(def).ok());
  }
}

TEST(FuseConvActivationTest, RulesRejectAnUnknownFusedActivation) {
  kernels::AttrMap attrs{{kernels::kConvActivationAttr, std::string("Tanh")}};
  EXPECT_EQ(kernels::BuildOpAttrs(kernels::OpKind::kConv, 15, attrs).status().code(),
            absl::StatusCode::kUnimplemented);
  attrs[kernels::kConvActivationAttr] = std::string("Clip");
  attrs[kernels::kConvActivationMinAttr] = std::nanf("");
  EXPECT_EQ(kernels::BuildOpAttrs(kernels::OpKind::kConv, 15, attrs).status().code(),
            absl::StatusCode::kInvalidArgument);
  attrs.erase(kernels::kConvActivationMinAttr);
  attrs[kernels::kConvActivationMaxAttr] = 6.0f;
  absl::StatusOr<kernels::OpAttrs> ok = kernels::BuildOpAttrs(kernels::OpKind::kConv, 15, attrs);
  ASSERT_TRUE(ok.ok()) << ok.status();
  const kernels::ConvEpilogue& e = std::get<kernels::ConvAttrs>(*ok).activation;
  EXPECT_EQ(e.kind, kernels::ConvActivation::kClip);
  EXPECT_EQ(e.hi, 6.0f);
  EXPECT_EQ(e.lo, -std::numeric_limits<float>::infinity());
}

}  // namespace
}  // namespace ndserve::engine
