// Shape inference: output shapes of every op family, and the errors for bad shapes, which
// must be INVALID_ARGUMENT naming the op and the shapes involved.
#include "kernels/shape_inference.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/node_attrs.h"
#include "kernels/plans.h"

namespace ndserve::kernels {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TensorDesc F32(Shape s) { return {DType::kFp32, std::move(s)}; }
TensorDesc I64(Shape s) { return {DType::kInt64, std::move(s)}; }

Shape OutShape(OpKind op, std::vector<TensorDesc> in, OpAttrs attrs = NoAttrs{}) {
  auto out = InferOutputs(op, in, attrs);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? (*out)[0].shape : Shape{-1};
}

absl::Status Error(OpKind op, std::vector<TensorDesc> in, OpAttrs attrs = NoAttrs{}) {
  return InferOutputs(op, in, attrs).status();
}

TEST(BroadcastShapes, Multidirectional) {
  EXPECT_THAT(*BroadcastShapes(Shape{2, 1, 4}, Shape{3, 1}), ElementsAre(2, 3, 4));
  EXPECT_THAT(*BroadcastShapes(Shape{}, Shape{5}), ElementsAre(5));
  EXPECT_THAT(*BroadcastShapes(Shape{0, 3}, Shape{3}), ElementsAre(0, 3));
  const absl::Status s = BroadcastShapes(Shape{2, 3}, Shape{4}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("[2,3]"), HasSubstr("[4]")));
}

TEST(BroadcastShapes, Unidirectional) {
  EXPECT_TRUE(IsUnidirectionallyBroadcastable(Shape{5}, Shape{3, 5}));
  EXPECT_TRUE(IsUnidirectionallyBroadcastable(Shape{3, 1}, Shape{3, 5}));
  EXPECT_TRUE(IsUnidirectionallyBroadcastable(Shape{}, Shape{3, 5}));
  EXPECT_FALSE(IsUnidirectionallyBroadcastable(Shape{1, 3, 5}, Shape{3, 5}));
  EXPECT_FALSE(IsUnidirectionallyBroadcastable(Shape{3}, Shape{3, 5}));
}

TEST(ShapeInference, ElementwiseBroadcastError) {
  const absl::Status s = Error(OpKind::kAdd, {F32({2, 3}), F32({4})});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("Add"), HasSubstr("[2,3]"), HasSubstr("[4]")));
  EXPECT_EQ(Error(OpKind::kMul, {F32({2}), I64({2})}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Error(OpKind::kRelu, {I64({2})}).code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(Error(OpKind::kAdd, {F32({2})}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Error(OpKind::kAdd, {F32({-1}), F32({1})}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ShapeInference, Gemm) {
  EXPECT_THAT(OutShape(OpKind::kGemm, {F32({3, 4}), F32({4, 5})}, GemmAttrs{}), ElementsAre(3, 5));
  GemmAttrs t{1.0f, 1.0f, true, true};
  EXPECT_THAT(OutShape(OpKind::kGemm, {F32({4, 3}), F32({5, 4}), F32({5})}, t), ElementsAre(3, 5));
  const absl::Status s = Error(OpKind::kGemm, {F32({3, 4}), F32({5, 6})}, GemmAttrs{});
  EXPECT_THAT(s.message(), AllOf(HasSubstr("Gemm"), HasSubstr("[3,4]"), HasSubstr("[5,6]")));
  EXPECT_THAT(Error(OpKind::kGemm, {F32({3, 4}), F32({4, 5}), F32({4, 5})}, GemmAttrs{}).message(),
              HasSubstr("C of shape [4,5]"));
  EXPECT_EQ(Error(OpKind::kGemm, {F32({3, 4, 1}), F32({4, 5})}, GemmAttrs{}).code(),
            absl::StatusCode::kInvalidArgument);
  // Wrong attribute struct for the op: reported, not a crash.
  EXPECT_EQ(Error(OpKind::kGemm, {F32({3, 4}), F32({4, 5})}, SoftmaxAttrs{}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ShapeInference, MatMul) {
  EXPECT_THAT(OutShape(OpKind::kMatMul, {F32({2, 1, 3, 4}), F32({3, 4, 5})}),
              ElementsAre(2, 3, 3, 5));
  EXPECT_THAT(OutShape(OpKind::kMatMul, {F32({4}), F32({2, 4, 5})}), ElementsAre(2, 5));
  EXPECT_THAT(OutShape(OpKind::kMatMul, {F32({2, 3, 4}), F32({4})}), ElementsAre(2, 3));
  EXPECT_THAT(OutShape(OpKind::kMatMul, {F32({7}), F32({7})}), ElementsAre());
  EXPECT_THAT(Error(OpKind::kMatMul, {F32({2, 3, 4}), F32({3, 5, 6})}).message(),
              AllOf(HasSubstr("[2,3,4]"), HasSubstr("[3,5,6]")));
  EXPECT_THAT(Error(OpKind::kMatMul, {F32({2, 3, 4}), F32({3, 4, 6})}).message(),
              HasSubstr("batch"));
}

TEST(ShapeInference, NormalizationAndGather) {
  EXPECT_EQ(OutShape(OpKind::kSoftmax, {F32({2, 3})}, SoftmaxAttrs{1}), (Shape{2, 3}));
  EXPECT_THAT(Error(OpKind::kSoftmax, {F32({2, 3})}, SoftmaxAttrs{2}).message(),
              HasSubstr("axis 2"));
  auto ln = InferOutputs(OpKind::kLayerNormalization, {F32({2, 3, 8}), F32({8}), F32({8})},
                         LayerNormAttrs{});
  ASSERT_TRUE(ln.ok());
  ASSERT_EQ(ln->size(), 3u);
  EXPECT_THAT((*ln)[1].shape, ElementsAre(2, 3, 1));
  EXPECT_THAT(
      Error(OpKind::kLayerNormalization, {F32({2, 3, 8}), F32({4})}, LayerNormAttrs{}).message(),
      AllOf(HasSubstr("Scale"), HasSubstr("[4]"), HasSubstr("[8]")));
  EXPECT_THAT(OutShape(OpKind::kGather, {F32({10, 4}), I64({2, 3})}, GatherAttrs{0}),
              ElementsAre(2, 3, 4));
  EXPECT_THAT(OutShape(OpKind::kGather, {F32({3, 5, 2}), I64({})}, GatherAttrs{1}),
              ElementsAre(3, 2));
  EXPECT_EQ(Error(OpKind::kGather, {F32({3}), F32({1})}, GatherAttrs{}).code(),
            absl::StatusCode::kUnimplemented);
}

TEST(ShapeInference, Reduce) {
  EXPECT_THAT(OutShape(OpKind::kReduceSum, {F32({2, 3, 4})}, ReduceAttrs{{1}, true, false}),
              ElementsAre(2, 1, 4));
  EXPECT_THAT(OutShape(OpKind::kReduceMean, {F32({2, 3, 4})}, ReduceAttrs{{0, -1}, false, false}),
              ElementsAre(3));
  EXPECT_THAT(OutShape(OpKind::kReduceSum, {F32({2, 3})}, ReduceAttrs{{}, false, false}),
              ElementsAre());
  EXPECT_THAT(OutShape(OpKind::kReduceSum, {F32({2, 3})}, ReduceAttrs{{}, false, true}),
              ElementsAre(2, 3));
  EXPECT_THAT(Error(OpKind::kReduceSum, {F32({2, 3})}, ReduceAttrs{{1, -1}, true, false}).message(),
              HasSubstr("twice"));
}

TEST(ShapeInference, ShapeOps) {
  EXPECT_THAT(OutShape(OpKind::kReshape, {F32({2, 3, 4})}, ReshapeAttrs{{0, -1, 2}, false}),
              ElementsAre(2, 6, 2));
  EXPECT_THAT(Error(OpKind::kReshape, {F32({2, 3, 4})}, ReshapeAttrs{{5, -1}, false}).message(),
              AllOf(HasSubstr("[2,3,4]"), HasSubstr("[5,-1]")));
  EXPECT_THAT(Error(OpKind::kReshape, {F32({2, 3})}, ReshapeAttrs{{-1, -1}, false}).message(),
              HasSubstr("more than one -1"));
  EXPECT_THAT(OutShape(OpKind::kReshape, {F32({0, 3})}, ReshapeAttrs{{0, 3}, true}),
              ElementsAre(0, 3));
  EXPECT_THAT(OutShape(OpKind::kFlatten, {F32({2, 3, 4})}, FlattenAttrs{3}), ElementsAre(24, 1));
  EXPECT_THAT(OutShape(OpKind::kTranspose, {F32({2, 3, 4})}, TransposeAttrs{}),
              ElementsAre(4, 3, 2));
  EXPECT_THAT(Error(OpKind::kTranspose, {F32({2, 3, 4})}, TransposeAttrs{{0, 0, 1}}).message(),
              HasSubstr("not a permutation"));
  EXPECT_THAT(OutShape(OpKind::kUnsqueeze, {F32({3, 4})}, UnsqueezeAttrs{{0, -1}}),
              ElementsAre(1, 3, 4, 1));
  EXPECT_THAT(OutShape(OpKind::kSqueeze, {F32({1, 3, 1})}, SqueezeAttrs{}), ElementsAre(3));
  EXPECT_THAT(Error(OpKind::kSqueeze, {F32({1, 3})}, SqueezeAttrs{{1}}).message(),
              HasSubstr("size is 3"));
  EXPECT_THAT(OutShape(OpKind::kConcat, {F32({2, 3}), F32({2, 5})}, ConcatAttrs{-1}),
              ElementsAre(2, 8));
  EXPECT_THAT(Error(OpKind::kConcat, {F32({2, 3}), F32({3, 5})}, ConcatAttrs{1}).message(),
              AllOf(HasSubstr("[3,5]"), HasSubstr("[2,3]")));
  auto cast = InferOutputs(OpKind::kCast, {F32({2})}, CastAttrs{DType::kFp16});
  ASSERT_TRUE(cast.ok());
  EXPECT_EQ((*cast)[0].dtype, DType::kFp16);
  EXPECT_EQ(Error(OpKind::kCast, {F32({2})}, CastAttrs{DType::kBytes}).code(),
            absl::StatusCode::kUnimplemented);
}

// The operators PyTorch's GroupNorm, PixelShuffle, indexed assignment and remainder
// export to: shapes, and INVALID_ARGUMENT naming the op and the shapes when they do not fit.
TEST(ShapeInference, InstanceNormDepthSpaceScatterNDMod) {
  EXPECT_THAT(OutShape(OpKind::kInstanceNormalization, {F32({2, 4, 5, 6}), F32({4}), F32({4})},
                       BatchNormAttrs{}),
              ElementsAre(2, 4, 5, 6));
  absl::Status s =
      Error(OpKind::kInstanceNormalization, {F32({2, 4, 5}), F32({3}), F32({4})}, BatchNormAttrs{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("InstanceNormalization"), HasSubstr("[3]")));
  EXPECT_EQ(
      Error(OpKind::kInstanceNormalization, {F32({2, 4}), F32({4}), F32({4})}, BatchNormAttrs{})
          .code(),
      absl::StatusCode::kInvalidArgument);

  DepthSpaceAttrs d2s{2, true, true};
  EXPECT_THAT(OutShape(OpKind::kDepthToSpace, {F32({1, 8, 3, 5})}, d2s), ElementsAre(1, 2, 6, 10));
  s = Error(OpKind::kDepthToSpace, {F32({1, 6, 3, 5})}, d2s);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("DepthToSpace"), HasSubstr("[1,6,3,5]")));
  DepthSpaceAttrs s2d{3, false, false};
  EXPECT_THAT(OutShape(OpKind::kSpaceToDepth, {F32({2, 2, 6, 9})}, s2d), ElementsAre(2, 18, 2, 3));
  EXPECT_EQ(Error(OpKind::kSpaceToDepth, {F32({2, 2, 6, 8})}, s2d).code(),
            absl::StatusCode::kInvalidArgument);
  // blocksize^2 overflows: refused, not wrapped.
  EXPECT_EQ(Error(OpKind::kSpaceToDepth, {F32({1, 1, 0, 0})},
                  DepthSpaceAttrs{int64_t{1} << 40, false, false})
                .code(),
            absl::StatusCode::kInvalidArgument);

  EXPECT_THAT(OutShape(OpKind::kScatterND, {F32({4, 5, 6}), I64({2, 3, 2}), F32({2, 3, 6})},
                       ScatterNDAttrs{}),
              ElementsAre(4, 5, 6));
  s = Error(OpKind::kScatterND, {F32({4, 5, 6}), I64({2, 2}), F32({2, 5})}, ScatterNDAttrs{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("ScatterND"), HasSubstr("[2,6]")));
  EXPECT_EQ(Error(OpKind::kScatterND, {F32({4}), I64({2, 2}), F32({2})}, ScatterNDAttrs{}).code(),
            absl::StatusCode::kInvalidArgument);  // tuples longer than data's rank

  EXPECT_THAT(OutShape(OpKind::kMod, {I64({2, 3}), I64({3})}, ModAttrs{}), ElementsAre(2, 3));
  s = Error(OpKind::kMod, {F32({2}), F32({2})}, ModAttrs{false});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("fmod=1"));
  EXPECT_THAT(OutShape(OpKind::kMod, {F32({2}), F32({2})}, ModAttrs{true}), ElementsAre(2));
}

// IsNaN / IsInf give BOOL of X's shape; LessOrEqual broadcasts like Less; Celu refuses an
// alpha of 0 (it divides by it).
TEST(ShapeInference, FloatClassCompareAndCelu) {
  for (OpKind op : {OpKind::kIsNaN, OpKind::kIsInf}) {
    auto out = InferOutputs(op, {F32({2, 3})}, FloatClassAttrs{});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].dtype, DType::kBool);
    EXPECT_THAT((*out)[0].shape, ElementsAre(2, 3));
    EXPECT_EQ(Error(op, {I64({2})}, FloatClassAttrs{}).code(), absl::StatusCode::kUnimplemented);
  }
  EXPECT_THAT(OutShape(OpKind::kLessOrEqual, {I64({4, 1}), I64({3})}), ElementsAre(4, 3));
  EXPECT_EQ(BuildOpAttrs(OpKind::kCelu, 13, {{"alpha", 0.0f}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// GridSample: (N, C, H_out, W_out) from X (N, C, H, W) and grid (N, H_out, W_out, 2). OneHot:
// depth inserted at axis, the values' type out.
TEST(ShapeInference, GridSampleAndOneHot) {
  EXPECT_THAT(
      OutShape(OpKind::kGridSample, {F32({2, 3, 5, 6}), F32({2, 4, 7, 2})}, GridSampleAttrs{}),
      ElementsAre(2, 3, 4, 7));
  absl::Status s =
      Error(OpKind::kGridSample, {F32({2, 3, 5, 6}), F32({1, 4, 7, 2})}, GridSampleAttrs{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("GridSample"), HasSubstr("[1,4,7,2]")));
  EXPECT_EQ(
      Error(OpKind::kGridSample, {F32({2, 3, 5, 6, 2}), F32({2, 4, 7, 3, 3})}, GridSampleAttrs{})
          .code(),
      absl::StatusCode::kInvalidArgument);
  OneHotAttrs oh;
  oh.depth = 5;
  oh.axis = 1;
  oh.dtype = DType::kInt64;
  auto out = InferOutputs(OpKind::kOneHot, {I64({2, 3})}, oh);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype, DType::kInt64);
  EXPECT_THAT((*out)[0].shape, ElementsAre(2, 5, 3));
  oh.axis = 3;
  EXPECT_EQ(Error(OpKind::kOneHot, {I64({2, 3})}, oh).code(), absl::StatusCode::kInvalidArgument);
  // depth and values must be constants, values two of them.
  EXPECT_EQ(BuildOpAttrs(OpKind::kOneHot, 13, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  HostValue depth;
  depth.dtype = DType::kInt64;
  depth.ints = {4};
  HostValue three = HostValue::OfInts({0, 1, 2});
  EXPECT_EQ(BuildOpAttrs(OpKind::kOneHot, 13, {}, HostInputs({std::nullopt, depth, three}))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  auto ok = BuildOpAttrs(OpKind::kOneHot, 13, {},
                         HostInputs({std::nullopt, depth, HostValue::OfInts({0, 1})}));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(std::get<OneHotAttrs>(*ok).depth, 4);
}

// torch.gather and scatter / scatter_add: the indices' shape out (GatherElements), data's
// (ScatterElements); indices of another rank, a non-axis dim past data's, or updates
// unlike the indices are INVALID_ARGUMENT naming the op and the shapes.
TEST(ShapeInference, GatherAndScatterElements) {
  const TensorDesc i32{DType::kInt32, {3, 2}};
  EXPECT_THAT(OutShape(OpKind::kGatherElements, {F32({3, 5}), I64({3, 7})}, ElementsAttrs{1}),
              ElementsAre(3, 7));
  EXPECT_THAT(OutShape(OpKind::kGatherElements, {F32({3, 5}), i32}, ElementsAttrs{-1}),
              ElementsAre(3, 2));
  absl::Status s = Error(OpKind::kGatherElements, {F32({3, 5}), I64({4, 2})}, ElementsAttrs{1});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("GatherElements"), HasSubstr("[4,2]"), HasSubstr("[3,5]")));
  EXPECT_EQ(Error(OpKind::kGatherElements, {F32({3, 5}), I64({3})}, ElementsAttrs{0}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Error(OpKind::kGatherElements, {F32({3, 5}), I64({3, 5})}, ElementsAttrs{2}).code(),
            absl::StatusCode::kInvalidArgument);  // axis past the rank

  const ElementsAttrs add{0, ScatterReduction::kAdd};
  EXPECT_THAT(OutShape(OpKind::kScatterElements, {F32({4, 3}), I64({9, 3}), F32({9, 3})}, add),
              ElementsAre(4, 3));
  s = Error(OpKind::kScatterElements, {F32({4, 3}), I64({9, 3}), F32({9, 2})}, add);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("ScatterElements"), HasSubstr("[9,2]")));
  // Booleans can be replaced, not added.
  const TensorDesc b{DType::kBool, {4, 3}}, bu{DType::kBool, {2, 3}};
  EXPECT_THAT(OutShape(OpKind::kScatterElements, {b, I64({2, 3}), bu}, ElementsAttrs{0}),
              ElementsAre(4, 3));
  EXPECT_EQ(Error(OpKind::kScatterElements, {b, I64({2, 3}), bu}, add).code(),
            absl::StatusCode::kUnimplemented);
}

TEST(Plans, BroadcastMergesContiguousDims) {
  // [2,3,4] + [4]: the three output dims collapse to [6,4] with B broadcast on the outer.
  const BroadcastPlan p = MakeBroadcastPlan(Shape{2, 3, 4}, Shape{2, 3, 4}, Shape{4});
  EXPECT_THAT(p.dims, ElementsAre(6, 4));
  EXPECT_THAT(p.a_strides, ElementsAre(4, 1));
  EXPECT_THAT(p.b_strides, ElementsAre(0, 1));
  const BroadcastPlan same = MakeBroadcastPlan(Shape{2, 3, 4}, Shape{2, 3, 4}, Shape{2, 3, 4});
  EXPECT_THAT(same.dims, ElementsAre(24));
}

TEST(Plans, TransposeMergesRuns) {
  // perm [0,2,3,1] on [2,3,4,5]: dims 2,3 stay adjacent and merge.
  const TransposePlan p = MakeTransposePlan(Shape{2, 3, 4, 5}, std::vector<int64_t>{0, 2, 3, 1});
  EXPECT_THAT(p.out_dims, ElementsAre(2, 20, 3));
  EXPECT_THAT(p.in_strides, ElementsAre(60, 1, 20));
}

}  // namespace
}  // namespace ndserve::kernels
