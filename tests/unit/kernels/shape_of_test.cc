// Shape and Size: attribute rules by opset, what they accept, and that their kernels read
// only the input's shape (a data-less input on another device is fine).
#include <cstdint>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/dispatch.h"
#include "kernels/node_attrs.h"
#include "kernels/shape_inference.h"

namespace ndserve::kernels {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ShapeOfRulesTest, StartAndEndExistFromOpset15) {
  AttrMap attrs{{"start", int64_t{1}}, {"end", int64_t{-1}}};
  absl::StatusOr<OpAttrs> at13 = BuildOpAttrs(OpKind::kShape, 13, attrs);
  ASSERT_TRUE(at13.ok()) << at13.status();
  EXPECT_EQ(std::get<ShapeAttrs>(*at13).start, 0);
  EXPECT_EQ(std::get<ShapeAttrs>(*at13).end, std::numeric_limits<int64_t>::max());
  absl::StatusOr<OpAttrs> at15 = BuildOpAttrs(OpKind::kShape, 15, attrs);
  ASSERT_TRUE(at15.ok()) << at15.status();
  EXPECT_EQ(std::get<ShapeAttrs>(*at15).start, 1);
  EXPECT_EQ(std::get<ShapeAttrs>(*at15).end, -1);

  const TensorDesc x{DType::kFp32, {2, 3, 4, 5}};
  absl::StatusOr<std::vector<TensorDesc>> out = InferOutputs(OpKind::kShape, {&x, 1}, *at15);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype, DType::kInt64);
  EXPECT_THAT((*out)[0].shape, ElementsAre(2));
}

TEST(ShapeOfRulesTest, BadAttributesAndInputCountsNameTheOp) {
  absl::StatusOr<OpAttrs> bad =
      BuildOpAttrs(OpKind::kShape, 15, AttrMap{{"start", std::vector<float>{1.0f}}});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("Shape"));

  const TensorDesc x{DType::kFp32, {2, 3}};
  const std::vector<TensorDesc> two = {x, x};
  absl::StatusOr<std::vector<TensorDesc>> shape = InferOutputs(OpKind::kShape, two, ShapeAttrs{});
  EXPECT_EQ(shape.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(shape.status().message()), HasSubstr("Shape"));
  absl::StatusOr<std::vector<TensorDesc>> size = InferOutputs(OpKind::kSize, {}, NoAttrs{});
  EXPECT_EQ(size.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(size.status().message()), HasSubstr("Size"));
}

TEST(ShapeOfKernelTest, ReadsOnlyTheShapeOfAnInputOnAnotherDevice) {
  TensorView x;  // no data, on a device the CPU cannot read
  x.dtype = DType::kFp32;
  x.shape = {4, 0, 6};
  x.device = Device::Cuda(0);
  std::vector<int64_t> dims(2, -7);
  TensorView out;
  out.data = dims.data();
  out.dtype = DType::kInt64;
  out.shape = {2};
  out.device = Device::Cpu();
  ShapeAttrs attrs;
  attrs.start = -2;
  ASSERT_TRUE(RunKernel(OpKind::kShape, KernelContext::Cpu(), {&x, 1}, {&out, 1}, attrs).ok());
  EXPECT_THAT(dims, ElementsAre(0, 6));

  int64_t numel = -1;
  out.data = &numel;
  out.shape = {};
  ASSERT_TRUE(RunKernel(OpKind::kSize, KernelContext::Cpu(), {&x, 1}, {&out, 1}, NoAttrs{}).ok());
  EXPECT_EQ(numel, 0);

  // The output is still checked: a wrong output shape is refused, naming the op.
  out.shape = {3};
  absl::Status wrong =
      RunKernel(OpKind::kSize, KernelContext::Cpu(), {&x, 1}, {&out, 1}, NoAttrs{});
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(wrong.message()), HasSubstr("Size"));
}

}  // namespace
}  // namespace ndserve::kernels
