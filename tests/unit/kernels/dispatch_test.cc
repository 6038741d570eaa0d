// The dispatch table, call validation, ONNX attribute resolution and the GPU-less
// behaviour (no CUDA context can be made without a device).
#include "kernels/dispatch.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/node_attrs.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ndserve::kernels {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::HostTensor;

// Control ops (If) have no kernel on any device: the engine runs them.
TEST(Dispatch, EveryOpHasACpuKernel) {
  for (int i = 0; i < kNumOpKinds; ++i) {
    const OpKind op = static_cast<OpKind>(i);
    EXPECT_EQ(Lookup(op, Device::Cpu()).ok(), !GetOpInfo(op).control) << OpKindName(op);
    EXPECT_EQ(*OpKindFromOnnx(OpKindName(op)), op);
  }
}

TEST(Dispatch, CudaKernelsExistExactlyWhenBuilt) {
  for (int i = 0; i < kNumOpKinds; ++i) {
    const OpKind op = static_cast<OpKind>(i);
    auto fn = Lookup(op, Device::Cuda(0));
    if (GetOpInfo(op).control) {
      EXPECT_EQ(fn.status().code(), absl::StatusCode::kUnimplemented) << OpKindName(op);
    } else if (CudaBuilt()) {
      EXPECT_TRUE(fn.ok()) << OpKindName(op);
    } else {
      EXPECT_EQ(fn.status().code(), absl::StatusCode::kUnimplemented);
      EXPECT_THAT(fn.status().message(), AllOf(HasSubstr(OpKindName(op)), HasSubstr("cuda")));
    }
  }
}

TEST(Dispatch, UnknownOperatorsNamed) {
  auto hardmax = OpKindFromOnnx("Hardmax");
  EXPECT_EQ(hardmax.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(hardmax.status().message(), HasSubstr("'Hardmax'"));
  auto custom = OpKindFromOnnx("Relu", "com.example");
  EXPECT_THAT(custom.status().message(), HasSubstr("com.example"));
  EXPECT_TRUE(OpKindFromOnnx("Relu", "ai.onnx").ok());
}

TEST(Dispatch, NoGpuResourcesWithoutADevice) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  auto r = GpuResources::Create(Device::Cuda(0));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(Dispatch, ValidatesOutputs) {
  testing::DeviceRunner cpu(Device::Cpu());
  const HostTensor a = testing::RandomTensor({2, 3}, 1), b = testing::RandomTensor({3}, 2);
  auto wrong_shape = cpu.RunWithOutputs(OpKind::kAdd, {a, b}, {{DType::kFp32, {3, 2}}}, NoAttrs{});
  EXPECT_EQ(wrong_shape.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong_shape.status().message(),
              AllOf(HasSubstr("Add"), HasSubstr("FP32[3,2]"), HasSubstr("FP32[2,3]")));
  auto wrong_type = cpu.RunWithOutputs(OpKind::kAdd, {a, b}, {{DType::kInt32, {2, 3}}}, NoAttrs{});
  EXPECT_EQ(wrong_type.status().code(), absl::StatusCode::kInvalidArgument);
  auto too_many = cpu.RunWithOutputs(OpKind::kAdd, {a, b},
                                     {{DType::kFp32, {2, 3}}, {DType::kFp32, {2, 3}}}, NoAttrs{});
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kInvalidArgument);
  auto bad_bcast = cpu.Run(OpKind::kAdd, {a, testing::RandomTensor({4}, 3)}, NoAttrs{});
  EXPECT_EQ(bad_bcast.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_bcast.status().message(), AllOf(HasSubstr("[2,3]"), HasSubstr("[4]")));
}

// An allocator that hands out views of a wrong shape or type on request, to check that the
// dispatch wrapper holds a kOpDataShape kernel's outputs to its rules.
class LyingOutputs : public OutputAllocator {
 public:
  absl::StatusOr<TensorView> Allocate(int, ShapeSpan shape) override {
    storage_.assign(std::max<int64_t>(NumElements(shape), 1), 0);
    return TensorView{storage_.data(), dtype_, Shape(shape.begin(), shape.end()), Device::Cpu()};
  }
  DType dtype_ = DType::kInt64;

 private:
  std::vector<int64_t> storage_;
};

TEST(Dispatch, DataShapedOpsTakeNoOutputsAndAllocateWhatTheirRulesSay) {
  float x[4] = {0, 2, 0, 4};
  const TensorView in{x, DType::kFp32, {2, 2}, Device::Cpu()};
  LyingOutputs outputs;
  KernelContext ctx = KernelContext::Cpu();
  // No allocator, or preallocated outputs: refused before the kernel runs.
  int64_t y[8];
  const TensorView pre{y, DType::kInt64, {2, 2}, Device::Cpu()};
  EXPECT_EQ(RunKernel(OpKind::kNonZero, ctx, {in}, {}, NoAttrs{}).code(),
            absl::StatusCode::kFailedPrecondition);
  ctx.outputs = &outputs;
  EXPECT_EQ(RunKernel(OpKind::kNonZero, ctx, {in}, {pre}, NoAttrs{}).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(RunKernel(OpKind::kNonZero, ctx, {in}, {}, NoAttrs{}).ok());
  // An allocator answering with the wrong type is an engine bug, reported as such.
  outputs.dtype_ = DType::kFp32;
  absl::Status wrong = RunKernel(OpKind::kNonZero, ctx, {in}, {}, NoAttrs{});
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(wrong.message(), HasSubstr("NonZero"));
}

TEST(Dispatch, RejectsViewsOnAnotherDeviceAndMissingData) {
  float x[4] = {1, 2, 3, 4}, y[4];
  TensorView in{x, DType::kFp32, {4}, Device::Cpu()};
  TensorView out{y, DType::kFp32, {4}, Device::Cuda(0)};
  absl::Status s = RunKernel(OpKind::kRelu, KernelContext::Cpu(), {in}, {out}, NoAttrs{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("cuda:0"));
  out.device = Device::Cpu();
  out.data = nullptr;
  s = RunKernel(OpKind::kRelu, KernelContext::Cpu(), {in}, {out}, NoAttrs{});
  EXPECT_THAT(s.message(), HasSubstr("no data"));
  // A CPU context handed to a CUDA kernel is refused before any CUDA call.
  if (CudaBuilt()) {
    auto fn = Lookup(OpKind::kRelu, Device::Cuda(0));
    ASSERT_TRUE(fn.ok());
    out.data = y;
    EXPECT_EQ((*fn)(KernelContext::Cpu(), {in}, {out}, NoAttrs{}).code(),
              absl::StatusCode::kInvalidArgument);
  }
}

TEST(NodeAttrs, DefaultsAndShapeInputs) {
  auto gemm =
      BuildOpAttrs(OpKind::kGemm, 13, {{"transB", int64_t{1}}, {"alpha", 0.5f}});
  ASSERT_TRUE(gemm.ok());
  const auto& g = std::get<GemmAttrs>(*gemm);
  EXPECT_TRUE(g.trans_b);
  EXPECT_FALSE(g.trans_a);
  EXPECT_EQ(g.alpha, 0.5f);
  EXPECT_EQ(g.beta, 1.0f);

  auto sum =
      BuildOpAttrs(OpKind::kReduceSum, 13, {{"keepdims", int64_t{0}}},
                   HostInputs({std::nullopt, HostValue::OfInts({1, 2})}));
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(std::get<ReduceAttrs>(*sum).axes, (std::vector<int64_t>{1, 2}));
  EXPECT_FALSE(std::get<ReduceAttrs>(*sum).keepdims);

  auto mean =
      BuildOpAttrs(OpKind::kReduceMean, 17, {{"axes", std::vector<int64_t>{1}}});
  ASSERT_TRUE(mean.ok());
  EXPECT_EQ(std::get<ReduceAttrs>(*mean).axes, (std::vector<int64_t>{1}));
  EXPECT_TRUE(std::get<ReduceAttrs>(*mean).keepdims);

  auto cast = BuildOpAttrs(OpKind::kCast, 13, {{"to", int64_t{10}}});
  ASSERT_TRUE(cast.ok());
  EXPECT_EQ(std::get<CastAttrs>(*cast).to, DType::kFp16);

  EXPECT_TRUE(GetOpInfo(OpKind::kReshape).IsHostInput(1));
  EXPECT_FALSE(GetOpInfo(OpKind::kReshape).IsHostInput(0));
  EXPECT_EQ(GetOpInfo(OpKind::kReduceMean).host_inputs, 0u);
}

TEST(NodeAttrs, Errors) {
  EXPECT_EQ(BuildOpAttrs(OpKind::kRelu, 9, {}).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_THAT(BuildOpAttrs(OpKind::kRelu, 18, {}).status().message(),
              HasSubstr("opset 18"));
  EXPECT_THAT(BuildOpAttrs(OpKind::kConcat, 13, {}).status().message(),
              HasSubstr("'axis'"));
  EXPECT_THAT(BuildOpAttrs(OpKind::kCast, 13, {}).status().message(),
              HasSubstr("'to'"));
  EXPECT_EQ(
      BuildOpAttrs(OpKind::kGemm, 13, {{"alpha", std::string("x")}}).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      BuildOpAttrs(OpKind::kLayerNormalization, 17, {{"stash_type", int64_t{0}}})
          .status()
          .code(),
      absl::StatusCode::kUnimplemented);
  EXPECT_EQ(BuildOpAttrs(OpKind::kReshape, 14, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DTypeFromOnnx(14).status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(DTypeFromOnnx(99).status().code(), absl::StatusCode::kInvalidArgument);
  for (int i = 0; i < kNumDTypes; ++i) {
    const DType d = static_cast<DType>(i);
    EXPECT_EQ(*DTypeFromOnnx(DTypeToOnnx(d)), d) << DTypeName(d);
  }
}

}  // namespace
}  // namespace ndserve::kernels
