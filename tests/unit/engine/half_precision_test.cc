// FP16/BF16 models computed in FP32 (engine/half_precision.h): what the rewrite does to a
// GraphDef, and that the rewritten graph computes on the CPU what FP32 arithmetic on the
// 16-bit values gives, rounded once at the output. tests/torch/ runs the FP16 twins of
// real exports (resnet18_fp16, bert_encoder_fp16, lstm_classifier_fp16) against PyTorch.
#include "engine/half_precision.h"

#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cast_convert.h"
#include "kernels/node_attrs.h"
#include "tests/unit/engine/cpu_graph_run.h"

namespace ndserve::engine {
namespace {

using kernels::BFloat16;
using kernels::Half;

constexpr int64_t kOnnxFloat = 1, kOnnxFloat16 = 10;

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

std::vector<uint16_t> HalfBits(const std::vector<float>& v) {
  std::vector<uint16_t> bits;
  for (float f : v) bits.push_back(kernels::FloatToHalf(f).bits);
  return bits;
}

std::vector<float> Floats(const std::string& bytes) {
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

const NodeDef* FindNode(const GraphDef& def, const std::string& name) {
  for (const NodeDef& n : def.nodes) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

// x FP16 [2,3] -> Mul(x, w FP16 [3]) -> m -> Cast(to FP16) -> y (FP16 output); also
// ConstantOfShape with an FP16 value -> c (FP16 output) and x passed straight through.
GraphDef HalfGraph() {
  GraphDef def;
  def.name = "half";
  def.opset = 17;
  def.inputs.push_back({"x", DType::kFp16, {2, 3}});
  def.outputs.push_back({"y", DType::kFp16, {2, 3}});
  def.outputs.push_back({"c", DType::kFp16, {2}});
  def.outputs.push_back({"x", DType::kFp16, {2, 3}});
  def.initializers.push_back({"w", DType::kFp16, {3}, Bytes(HalfBits({1.5f, -2.0f, 0.25f}))});
  def.initializers.push_back({"shape", DType::kInt64, {1}, Bytes(std::vector<int64_t>{2})});
  def.nodes.push_back({"mul", "Mul", "", {"x", "w"}, {"m"}, {}});
  def.nodes.push_back({"cast", "Cast", "", {"m"}, {"y"}, {{"to", kOnnxFloat16}}});
  kernels::HostValue value{DType::kFp16, {1}, {}, {0.5}};
  def.nodes.push_back({"fill", "ConstantOfShape", "", {"shape"}, {"c"}, {{"value", value}}});
  return def;
}

TEST(HalfPrecisionTest, WidensInitializersAttributesAndCastsAtTheEdges) {
  GraphDef def = HalfGraph();
  absl::StatusOr<int> changed = ComputeHalfPrecisionInFp32(&def);
  ASSERT_TRUE(changed.ok()) << changed.status();
  // w, Cast's `to`, the ConstantOfShape value, input x, outputs y and c.
  EXPECT_EQ(*changed, 6);

  ASSERT_EQ(def.initializers[0].dtype, DType::kFp32);
  EXPECT_EQ(Floats(def.initializers[0].bytes), (std::vector<float>{1.5f, -2.0f, 0.25f}));
  EXPECT_EQ(def.initializers[1].dtype, DType::kInt64);

  // The signature is the file's.
  EXPECT_EQ(def.inputs[0].dtype, DType::kFp16);
  for (const TensorSpec& out : def.outputs) EXPECT_EQ(out.dtype, DType::kFp16);

  ASSERT_EQ(def.nodes.size(), 6u);
  const NodeDef& in_cast = def.nodes.front();
  EXPECT_EQ(in_cast.op_type, "Cast");
  EXPECT_EQ(in_cast.inputs, std::vector<std::string>{"x"});
  EXPECT_EQ(in_cast.outputs, std::vector<std::string>{"x/fp32"});
  EXPECT_EQ(std::get<int64_t>(in_cast.attrs.at("to")), kOnnxFloat);

  const NodeDef* mul = FindNode(def, "mul");
  ASSERT_NE(mul, nullptr);
  EXPECT_EQ(mul->inputs, (std::vector<std::string>{"x/fp32", "w"}));
  const NodeDef* cast = FindNode(def, "cast");
  ASSERT_NE(cast, nullptr);
  EXPECT_EQ(std::get<int64_t>(cast->attrs.at("to")), kOnnxFloat);
  EXPECT_EQ(cast->outputs, std::vector<std::string>{"y/fp32"});
  const NodeDef* fill = FindNode(def, "fill");
  ASSERT_NE(fill, nullptr);
  EXPECT_EQ(std::get<kernels::HostValue>(fill->attrs.at("value")).dtype, DType::kFp32);
  EXPECT_EQ(fill->outputs, std::vector<std::string>{"c/fp32"});

  // One Cast back per 16-bit output, none for the input passed straight through.
  const NodeDef* y_back = FindNode(def, "y/to_FP16");
  ASSERT_NE(y_back, nullptr);
  EXPECT_EQ(y_back->inputs, std::vector<std::string>{"y/fp32"});
  EXPECT_EQ(y_back->outputs, std::vector<std::string>{"y"});
  EXPECT_EQ(std::get<int64_t>(y_back->attrs.at("to")), kOnnxFloat16);
  EXPECT_NE(FindNode(def, "c/to_FP16"), nullptr);
  EXPECT_EQ(FindNode(def, "x/to_FP16"), nullptr);
}

TEST(HalfPrecisionTest, RewrittenGraphComputesInFp32AndRoundsAtTheOutput) {
  GraphDef def = HalfGraph();
  ASSERT_TRUE(ComputeHalfPrecisionInFp32(&def).ok());
  testing::CpuGraphRun run(std::move(def), "half");
  ASSERT_NE(run.context(), nullptr);
  PredictorContext& ctx = *run.context();
  const std::vector<float> x = {0.1f, 3.0f, -7.5f, 1000.0f, 0.333f, 2.0f};
  const std::vector<uint16_t> x_bits = HalfBits(x);
  ASSERT_TRUE(ctx.SetInput(0, {2, 3},
                           absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(x_bits.data()),
                                               x_bits.size() * 2))
                  .ok());
  ASSERT_TRUE(ctx.Run().ok());
  absl::StatusOr<InferOutputTensor> y = ctx.CopyOutput(0);
  ASSERT_TRUE(y.ok()) << y.status();
  ASSERT_EQ(y->dtype, DType::kFp16);
  ASSERT_EQ(y->data.size(), 12u);
  const float w[3] = {1.5f, -2.0f, 0.25f};
  for (int i = 0; i < 6; ++i) {
    uint16_t got;
    std::memcpy(&got, y->data.data() + 2 * i, 2);
    const float x16 = kernels::HalfToFloat(Half{x_bits[i]});
    EXPECT_EQ(got, kernels::FloatToHalf(x16 * w[i % 3]).bits) << i;
  }
  absl::StatusOr<InferOutputTensor> c = ctx.CopyOutput(1);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->dtype, DType::kFp16);
  ASSERT_EQ(c->data.size(), 4u);
  uint16_t c0;
  std::memcpy(&c0, c->data.data(), 2);
  EXPECT_EQ(c0, kernels::FloatToHalf(0.5f).bits);
  absl::StatusOr<InferOutputTensor> passed = ctx.CopyOutput(2);
  ASSERT_TRUE(passed.ok()) << passed.status();
  EXPECT_EQ(passed->dtype, DType::kFp16);
  EXPECT_EQ(std::memcmp(passed->data.data(), x_bits.data(), 12), 0);
  EXPECT_TRUE(ctx.Close().ok());
}

TEST(HalfPrecisionTest, Bf16InitializersAndFreshNamesThatDoNotCollide) {
  GraphDef def;
  def.name = "bf16";
  def.opset = 17;
  def.inputs.push_back({"x", DType::kBf16, {2}});
  def.outputs.push_back({"y", DType::kBf16, {2}});
  const std::vector<uint16_t> w = {kernels::FloatToBFloat16(3.0f).bits,
                                   kernels::FloatToBFloat16(-0.5f).bits};
  def.initializers.push_back({"w", DType::kBf16, {2}, Bytes(w)});
  // A value already named what the rewrite would call x's FP32 copy.
  def.nodes.push_back({"neg", "Neg", "", {"x"}, {"x/fp32"}, {}});
  def.nodes.push_back({"mul", "Mul", "", {"x/fp32", "w"}, {"y"}, {}});
  absl::StatusOr<int> changed = ComputeHalfPrecisionInFp32(&def);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_EQ(*changed, 3);
  EXPECT_EQ(Floats(def.initializers[0].bytes), (std::vector<float>{3.0f, -0.5f}));
  EXPECT_EQ(def.nodes.front().outputs, std::vector<std::string>{"x/fp32_2"});
  const NodeDef* neg = FindNode(def, "neg");
  ASSERT_NE(neg, nullptr);
  EXPECT_EQ(neg->inputs, std::vector<std::string>{"x/fp32_2"});
  EXPECT_EQ(neg->outputs, std::vector<std::string>{"x/fp32"});
  const NodeDef* back = FindNode(def, "y/to_BF16");
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(std::get<int64_t>(back->attrs.at("to")), kernels::DTypeToOnnx(DType::kBf16));
  EXPECT_TRUE(Graph::Build(std::move(def)).ok());
}

TEST(HalfPrecisionTest, Fp32GraphIsUntouched) {
  GraphDef def;
  def.name = "fp32";
  def.opset = 17;
  def.inputs.push_back({"x", DType::kFp32, {2}});
  def.outputs.push_back({"y", DType::kFp32, {2}});
  def.nodes.push_back({"neg", "Neg", "", {"x"}, {"y"}, {}});
  def.nodes.push_back({"cast", "Cast", "", {"y"}, {"z"}, {{"to", kOnnxFloat}}});
  absl::StatusOr<int> changed = ComputeHalfPrecisionInFp32(&def);
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(*changed, 0);
  EXPECT_EQ(def.nodes.size(), 2u);
  EXPECT_EQ(def.nodes[0].inputs, std::vector<std::string>{"x"});
}

TEST(HalfPrecisionTest, OddByteCountIsInvalidArgument) {
  GraphDef def;
  def.initializers.push_back({"w", DType::kFp16, {1}, std::string(3, '\0')});
  absl::StatusOr<int> changed = ComputeHalfPrecisionInFp32(&def);
  EXPECT_EQ(changed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(changed.status().message().find("'w'"), std::string::npos);
}

}  // namespace
}  // namespace ndserve::engine
