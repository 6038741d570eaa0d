// NonMaxSuppression and RoiAlign on every device present: the edge cases the fixtures
// (tests/fixtures/ops/nms_*, roialign_*) leave out, each result on a GPU also compared
// with the CPU kernel's (bit-exact: both run kernels/detection_coord.h), plus the rules'
// errors. Box values below are small integers or halves, so the IoUs are exact.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/node_attrs.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ndserve::kernels::testing {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

NmsAttrs Nms(int64_t max_per_class, float iou, std::optional<float> score = std::nullopt) {
  NmsAttrs a;
  a.max_per_class = max_per_class;
  a.iou_threshold = iou;
  a.has_score_threshold = score.has_value();
  a.score_threshold = score.value_or(0.0f);
  return a;
}

RoiAlignAttrs Roi(int64_t oh, int64_t ow, int64_t sr, float scale, bool half_pixel = true) {
  RoiAlignAttrs a;
  a.output_height = oh;
  a.output_width = ow;
  a.sampling_ratio = sr;
  a.spatial_scale = scale;
  a.half_pixel = half_pixel;
  return a;
}

void ExpectError(const absl::Status& s, absl::StatusCode code, const std::string& part) {
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(part)) << s;
}

class DetectionTest : public ::testing::TestWithParam<Device> {
 protected:
  // The selected rows of NonMaxSuppression, flattened.
  std::vector<int64_t> RunNms(const HostTensor& boxes, const HostTensor& scores,
                              const NmsAttrs& a) {
    const auto got = RunAndCrossCheck(GetParam(), OpKind::kNonMaxSuppression, {boxes, scores},
                                      a, 0, 0);
    if (got.size() != 1) {
      ADD_FAILURE() << "no output";
      return {};
    }
    EXPECT_EQ(got[0].shape.size(), 2u);
    EXPECT_EQ(got[0].shape[1], 3);
    return got[0].Values<int64_t>();
  }
};

TEST_P(DetectionTest, NmsOfNoBoxesSelectsNothing) {
  const auto rows = RunNms(HostTensor::Of<float>({2, 0, 4}, {}),
                           HostTensor::Of<float>({2, 3, 0}, {}), Nms(10, 0.5f));
  EXPECT_TRUE(rows.empty());
}

TEST_P(DetectionTest, NmsWithMaxZeroSelectsNothing) {
  const HostTensor boxes = HostTensor::Of<float>({1, 2, 4}, {0, 0, 1, 1, 5, 5, 6, 6});
  const HostTensor scores = HostTensor::Of<float>({1, 1, 2}, {0.9f, 0.8f});
  EXPECT_TRUE(RunNms(boxes, scores, Nms(0, 0.5f)).empty());
}

// Equal scores go by box index; the rows come by batch, then class, then selection.
TEST_P(DetectionTest, NmsTiesGoByIndexAndRowsByBatchThenClass) {
  // Four disjoint boxes per batch.
  std::vector<float> b;
  for (int batch = 0; batch < 2; ++batch) {
    for (int i = 0; i < 4; ++i) b.insert(b.end(), {0, 2.0f * i, 1, 2.0f * i + 1});
  }
  const HostTensor boxes = HostTensor::Of<float>({2, 4, 4}, b);
  const HostTensor scores = HostTensor::Of<float>(
      {2, 2, 4}, {0.5f, 0.7f, 0.5f, 0.7f, /**/ 0.1f, 0.1f, 0.1f, 0.1f,
                  /**/ 0.2f, 0.3f, 0.3f, 0.3f, /**/ 0.9f, 0.0f, 0.9f, 0.0f});
  const std::vector<int64_t> want = {0, 0, 1, 0, 0, 3, 0, 0, 0,  // 0.7, 0.7, 0.5 (max 3)
                                     0, 1, 0, 0, 1, 1, 0, 1, 2,  //
                                     1, 0, 1, 1, 0, 2, 1, 0, 3,  //
                                     1, 1, 0, 1, 1, 2, 1, 1, 1};
  EXPECT_THAT(RunNms(boxes, scores, Nms(3, 0.5f)), ElementsAreArray(want));
}

// A box inside another overlaps it by inner / outer area: here 0.25, so a threshold below
// that suppresses it and one at or above does not. The score threshold is strict.
TEST_P(DetectionTest, NmsBoxInsideAnotherAndScoreThreshold) {
  const HostTensor boxes = HostTensor::Of<float>({1, 3, 4}, {0, 0, 4, 4,  // area 16
                                                             1, 1, 3, 3,  // area 4, inside
                                                             10, 10, 11, 11});
  const HostTensor scores = HostTensor::Of<float>({1, 1, 3}, {0.9f, 0.8f, 0.5f});
  EXPECT_THAT(RunNms(boxes, scores, Nms(10, 0.2f)), ElementsAreArray({0, 0, 0, 0, 0, 2}));
  EXPECT_THAT(RunNms(boxes, scores, Nms(10, 0.25f)),
              ElementsAreArray({0, 0, 0, 0, 0, 1, 0, 0, 2}));
  EXPECT_THAT(RunNms(boxes, scores, Nms(10, 0.25f, 0.5f)), ElementsAreArray({0, 0, 0, 0, 0, 1}));
}

// A box without area overlaps nothing, even an identical one; flipped corners and the
// center format describe the same boxes.
TEST_P(DetectionTest, NmsZeroAreaFlippedAndCenterBoxes) {
  const HostTensor scores = HostTensor::Of<float>({1, 1, 4}, {0.9f, 0.8f, 0.7f, 0.6f});
  const HostTensor corners = HostTensor::Of<float>({1, 4, 4}, {2, 2, 2, 6,  // no area
                                                               2, 2, 2, 6,  // the same
                                                               4, 4, 0, 0,  // flipped
                                                               1, 1, 5, 5});
  EXPECT_THAT(RunNms(corners, scores, Nms(10, 0.3f)),
              ElementsAreArray({0, 0, 0, 0, 0, 1, 0, 0, 2}));
  // The last three as [xc, yc, w, h]; the first has zero width.
  const HostTensor centers = HostTensor::Of<float>({1, 4, 4}, {4, 2, 0, 4,  //
                                                               4, 2, 0, 4,  //
                                                               2, 2, 4, 4,  //
                                                               3, 3, 4, 4});
  NmsAttrs a = Nms(10, 0.3f);
  a.center_point_box = true;
  EXPECT_THAT(RunNms(centers, scores, a), ElementsAreArray({0, 0, 0, 0, 0, 1, 0, 0, 2}));
}

// Hundreds of crowded boxes over several batches and classes: more than one 64-box tile
// of the CUDA kernel's mask, checked against the CPU kernel by the runner, and against
// the greedy definition here.
TEST_P(DetectionTest, NmsManyBoxesMatchesGreedyDefinition) {
  const int64_t batches = 2, classes = 3, n = 300;
  const std::vector<float> lo = RandomFloats(batches * n * 2, 11, 0.0f, 20.0f);
  const std::vector<float> size = RandomFloats(batches * n * 2, 12, 1.0f, 6.0f);
  std::vector<float> b(batches * n * 4);
  for (int64_t i = 0; i < batches * n; ++i) {
    b[i * 4 + 0] = lo[i * 2];
    b[i * 4 + 1] = lo[i * 2 + 1];
    b[i * 4 + 2] = lo[i * 2] + size[i * 2];
    b[i * 4 + 3] = lo[i * 2 + 1] + size[i * 2 + 1];
  }
  const HostTensor boxes = HostTensor::Of<float>({batches, n, 4}, b);
  const HostTensor scores = RandomTensor({batches, classes, n}, 13, 0.0f, 1.0f);
  const auto rows = RunNms(boxes, scores, Nms(int64_t{1} << 62, 0.4f, 0.2f));
  ASSERT_FALSE(rows.empty());
  const std::vector<float> s = scores.Values<float>();
  // In float, formed as torchvision's nms forms it, so no pair lands on the other side of
  // the threshold by rounding.
  const auto suppresses = [&](int64_t batch, int64_t i, int64_t j) {
    const float* p = b.data() + (batch * n + i) * 4;
    const float* q = b.data() + (batch * n + j) * 4;
    const float w = std::min(p[2], q[2]) - std::max(p[0], q[0]);
    const float h = std::min(p[3], q[3]) - std::max(p[1], q[1]);
    if (w <= 0 || h <= 0) return false;
    const float inter = w * h;
    const float area_p = (p[2] - p[0]) * (p[3] - p[1]), area_q = (q[2] - q[0]) * (q[3] - q[1]);
    return inter / (area_p + area_q - inter) > 0.4f;
  };
  int64_t suppressed = 0;
  for (int64_t batch = 0; batch < batches; ++batch) {
    for (int64_t c = 0; c < classes; ++c) {
      const float* cs = s.data() + (batch * classes + c) * n;
      std::vector<int64_t> order;
      for (int64_t i = 0; i < n; ++i) {
        if (cs[i] > 0.2f) order.push_back(i);
      }
      std::sort(order.begin(), order.end(), [&](int64_t i, int64_t j) {
        return cs[i] != cs[j] ? cs[i] > cs[j] : i < j;
      });
      std::vector<int64_t> kept;
      for (int64_t i : order) {
        bool keep = true;
        for (int64_t k : kept) keep = keep && !suppresses(batch, k, i);
        if (keep) kept.push_back(i);
      }
      suppressed += static_cast<int64_t>(order.size() - kept.size());
      std::vector<int64_t> got;
      for (std::size_t r = 0; r + 2 < rows.size(); r += 3) {
        if (rows[r] == batch && rows[r + 1] == c) got.push_back(rows[r + 2]);
      }
      EXPECT_THAT(got, ElementsAreArray(kept)) << "batch " << batch << " class " << c;
    }
  }
  EXPECT_GT(suppressed, 100);  // the boxes do crowd
}

TEST_P(DetectionTest, RoiAlignOfNoRoisIsEmpty) {
  const HostTensor x = RandomTensor({2, 3, 5, 6}, 21);
  const auto got = RunAndCrossCheck(GetParam(), OpKind::kRoiAlign,
                                    {x, HostTensor::Of<float>({0, 4}, {}),
                                     HostTensor::Of<int64_t>({0}, {})},
                                    Roi(2, 2, 0, 1.0f), 0, 0);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].shape, Shape({0, 3, 2, 2}));
}

TEST_P(DetectionTest, RoiAlignBatchIndexOutOfRangeIsInvalidArgument) {
  const HostTensor x = RandomTensor({2, 1, 4, 4}, 22);
  const HostTensor rois = HostTensor::Of<float>({2, 4}, {0, 0, 2, 2, 1, 1, 3, 3});
  for (const HostTensor& bad : {HostTensor::Of<int64_t>({2}, {0, 2}),
                                HostTensor::Of<int64_t>({2}, {-1, 0}),
                                HostTensor::Of<int32_t>({2}, {1, 5})}) {
    DeviceRunner runner(GetParam());
    const auto got = runner.Run(OpKind::kRoiAlign, {x, rois, bad}, Roi(2, 2, 2, 1.0f));
    ExpectError(got.status(), absl::StatusCode::kInvalidArgument, "batch_indices");
  }
  // The flag is cleared again: a good call on the same device runs.
  DeviceRunner runner(GetParam());
  EXPECT_TRUE(runner.Run(OpKind::kRoiAlign, {x, rois, HostTensor::Of<int64_t>({2}, {1, 0})},
                         Roi(2, 2, 2, 1.0f))
                  .ok());
}

// INT32 batch indices read as INT64 ones do; a roi on a constant image averages to that
// constant where its samples are inside, and samples outside [-1, H] x [-1, W] count 0.
TEST_P(DetectionTest, RoiAlignInt32IndicesAndOutsideSamples) {
  const HostTensor x = HostTensor::Of<float>({2, 1, 4, 4}, std::vector<float>(32, 3.0f));
  // Inside; then a roi whose left column of samples (x in [-3, -1)) lies outside.
  const HostTensor rois = HostTensor::Of<float>({2, 4}, {0.5f, 0.5f, 3.5f, 3.5f,  //
                                                         -4.0f, 0.0f, 0.0f, 4.0f});
  const RoiAlignAttrs a = Roi(1, 2, 2, 1.0f);
  const auto got64 = RunAndCrossCheck(GetParam(), OpKind::kRoiAlign,
                                      {x, rois, HostTensor::Of<int64_t>({2}, {1, 0})}, a, 0, 0);
  const auto got32 = RunAndCrossCheck(GetParam(), OpKind::kRoiAlign,
                                      {x, rois, HostTensor::Of<int32_t>({2}, {1, 0})}, a, 0, 0);
  ASSERT_EQ(got64.size(), 1u);
  ASSERT_EQ(got32.size(), 1u);
  EXPECT_TRUE(AllClose(got32[0], got64[0], 0, 0));
  // half_pixel: roi 2 spans x in [-4.5, -0.5]: bin 0 samples x = -4, -3 (outside), bin 1
  // x = -2 (outside) and -1 (inside, reads column 0): half its samples count.
  EXPECT_THAT(got64[0].Values<float>(), ElementsAreArray({3.0f, 3.0f, 0.0f, 1.5f}));
}

// Past what the CPU kernel holds per roi (65536 taps) it samples as it goes; either way a
// roi inside a constant image averages to the constant.
TEST_P(DetectionTest, RoiAlignManySamplesPerBin) {
  const HostTensor x = HostTensor::Of<float>({1, 2, 4, 4}, std::vector<float>(32, 2.0f));
  const HostTensor rois = HostTensor::Of<float>({1, 4}, {0.5f, 0.5f, 3.5f, 3.5f});
  const HostTensor batch = HostTensor::Of<int64_t>({1}, {0});
  for (const int64_t sr : {255, 300}) {  // 65025 and 90000 samples a bin
    const auto got =
        RunAndCrossCheck(GetParam(), OpKind::kRoiAlign, {x, rois, batch}, Roi(1, 1, sr, 1.0f), 0, 0);
    ASSERT_EQ(got.size(), 1u);
    for (const float v : got[0].Values<float>()) EXPECT_NEAR(v, 2.0f, 1e-3f) << sr;
  }
}

TEST(DetectionRulesTest, ShapeErrors) {
  const auto inv = absl::StatusCode::kInvalidArgument;
  const auto f32 = [](Shape s) { return TensorDesc{DType::kFp32, std::move(s)}; };
  const NmsAttrs nms = Nms(1, 0.5f);
  const auto nms_error = [&](std::vector<TensorDesc> in) {
    return InferOutputs(OpKind::kNonMaxSuppression, in, nms).status();
  };
  ExpectError(nms_error({f32({1, 5, 3}), f32({1, 1, 5})}), inv, "boxes");
  ExpectError(nms_error({f32({2, 5, 4}), f32({1, 1, 5})}), inv, "scores");
  ExpectError(nms_error({f32({1, 5, 4}), f32({1, 1, 6})}), inv, "scores");
  ExpectError(nms_error({f32({5, 4}), f32({1, 5})}), inv, "NonMaxSuppression");
  // An unsupported type is UNIMPLEMENTED (rule_util.h's CheckDType), not a bad model.
  const auto unimpl = absl::StatusCode::kUnimplemented;
  ExpectError(nms_error({TensorDesc{DType::kFp16, {1, 5, 4}}, f32({1, 1, 5})}), unimpl, "boxes");
  const auto ok = InferOutputs(OpKind::kNonMaxSuppression, {f32({1, 5, 4}), f32({1, 2, 5})}, nms);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)[0].dtype, DType::kInt64);
  EXPECT_EQ((*ok)[0].shape, Shape({kDataDependentDim, 3}));

  const RoiAlignAttrs roi = Roi(2, 3, 0, 1.0f);
  const auto roi_error = [&](std::vector<TensorDesc> in) {
    return InferOutputs(OpKind::kRoiAlign, in, roi).status();
  };
  const TensorDesc idx{DType::kInt64, {4}};
  ExpectError(roi_error({f32({1, 3, 8}), f32({4, 4}), idx}), inv, "RoiAlign");
  ExpectError(roi_error({f32({1, 3, 8, 8}), f32({4, 5}), idx}), inv, "rois");
  ExpectError(roi_error({f32({1, 3, 8, 8}), f32({4, 4}), TensorDesc{DType::kInt64, {3}}}), inv,
              "batch_indices");
  ExpectError(roi_error({f32({1, 3, 8, 8}), f32({4, 4}), TensorDesc{DType::kFp32, {4}}}), unimpl,
              "batch_indices");
  const auto shape = InferOutputs(OpKind::kRoiAlign, {f32({1, 3, 8, 8}), f32({4, 4}), idx}, roi);
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ((*shape)[0].shape, Shape({4, 3, 2, 3}));
}

TEST(DetectionRulesTest, AttributeErrors) {
  const auto inv = absl::StatusCode::kInvalidArgument;
  ExpectError(BuildOpAttrs(OpKind::kNonMaxSuppression, 13, {{"center_point_box", int64_t{2}}})
                  .status(),
              inv, "center_point_box");
  HostValue iou;
  iou.dtype = DType::kFp32;
  iou.shape = {1};
  iou.reals = {1.5};
  ExpectError(BuildOpAttrs(OpKind::kNonMaxSuppression, 13, {},
                           HostInputs({std::nullopt, std::nullopt, std::nullopt, iou}))
                  .status(),
              inv, "iou_threshold");
  // torchvision's "no limit" (INT64_MAX) is clamped, not wrapped.
  HostValue max_boxes = HostValue::OfInts({std::numeric_limits<int64_t>::max()});
  const auto built = BuildOpAttrs(OpKind::kNonMaxSuppression, 13, {},
                                  HostInputs({std::nullopt, std::nullopt, max_boxes}));
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_GT(std::get<NmsAttrs>(*built).max_per_class, int64_t{1} << 40);
  EXPECT_FALSE(std::get<NmsAttrs>(*built).has_score_threshold);

  ExpectError(BuildOpAttrs(OpKind::kRoiAlign, 16, {{"mode", std::string("median")}}).status(), inv,
              "mode");
  ExpectError(BuildOpAttrs(OpKind::kRoiAlign, 16,
                           {{"coordinate_transformation_mode", std::string("asymmetric")}})
                  .status(),
              inv, "coordinate_transformation_mode");
  ExpectError(BuildOpAttrs(OpKind::kRoiAlign, 16, {{"output_height", int64_t{0}}}).status(), inv,
              "output_height");
  ExpectError(BuildOpAttrs(OpKind::kRoiAlign, 16, {{"sampling_ratio", int64_t{-1}}}).status(), inv,
              "sampling_ratio");
  // Before opset 16 every RoiAlign is output_half_pixel; from 16 half_pixel is the default.
  const auto v13 = BuildOpAttrs(OpKind::kRoiAlign, 13, {});
  const auto v16 = BuildOpAttrs(OpKind::kRoiAlign, 16, {});
  ASSERT_TRUE(v13.ok() && v16.ok());
  EXPECT_FALSE(std::get<RoiAlignAttrs>(*v13).half_pixel);
  EXPECT_TRUE(std::get<RoiAlignAttrs>(*v16).half_pixel);
}

INSTANTIATE_TEST_SUITE_P(Devices, DetectionTest, ::testing::ValuesIn(TestDevices()),
                         DeviceTestName);

}  // namespace
}  // namespace ndserve::kernels::testing
