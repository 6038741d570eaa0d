// Conv + BatchNormalization folding (engine/fusion.h): which pairs it fuses, that the
// fused graph has no BatchNormalization and builds, and that the fused Conv computes what
// Conv followed by BatchNormalization did (both run through the CPU kernels).
#include "engine/fusion.h"

#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ndserve::engine {
namespace {

using kernels::testing::AllClose;
using kernels::testing::DeviceRunner;
using kernels::testing::HostTensor;
using kernels::testing::RandomFloats;

Initializer Fp32Init(const std::string& name, kernels::Shape shape, std::vector<float> v) {
  Initializer init;
  init.name = name;
  init.dtype = DType::kFp32;
  init.shape = std::move(shape);
  init.bytes.assign(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  return init;
}

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

}  // namespace
}  // namespace ndserve::engine
