// Conv-family kernels (Conv, ConvTranspose, pooling, BatchNormalization) on every device
// present, on shapes less regular than the fixtures', against naive double-precision
// references; on a GPU each result is also compared with the CPU kernel's. Plus the error
// paths: bad shapes and attributes name the op with the right code, and working space
// comes from (and goes back to) the context's scratch allocator.
//
// Tolerances: Conv / ConvTranspose 1e-5 + 1e-4 rel (sums of products in another order).
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/node_attrs.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ndserve::kernels::testing {
namespace {

using ::testing::HasSubstr;

constexpr double kAtol = 1e-5, kRtol = 1e-4;

// Naive 2-D conv (NCHW, OIHW weights, groups) in double.
HostTensor NaiveConv(const HostTensor& x, const HostTensor& w, const std::vector<float>* bias,
                     int64_t sh, int64_t sw, int64_t dh, int64_t dw, int64_t pt, int64_t pl,
                     int64_t oh, int64_t ow, int64_t group) {
  const int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], wd = x.shape[3];
  const int64_t m = w.shape[0], cg = w.shape[1], kh = w.shape[2], kw = w.shape[3];
  const std::vector<float> xv = x.Values<float>(), wv = w.Values<float>();
  std::vector<float> y(n * m * oh * ow);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t o = 0; o < m; ++o) {
      const int64_t g = o / (m / group);
      for (int64_t r = 0; r < oh; ++r) {
        for (int64_t s = 0; s < ow; ++s) {
          double acc = bias != nullptr ? (*bias)[o] : 0.0;
          for (int64_t ci = 0; ci < cg; ++ci) {
            for (int64_t a = 0; a < kh; ++a) {
              for (int64_t b = 0; b < kw; ++b) {
                const int64_t ih = r * sh - pt + a * dh, iw = s * sw - pl + b * dw;
                if (ih < 0 || ih >= h || iw < 0 || iw >= wd) continue;
                acc += static_cast<double>(xv[((i * c + g * cg + ci) * h + ih) * wd + iw]) *
                       wv[((o * cg + ci) * kh + a) * kw + b];
              }
            }
          }
          y[((i * m + o) * oh + r) * ow + s] = static_cast<float>(acc);
        }
      }
    }
  }
  return HostTensor::Of<float>({n, m, oh, ow}, y);
}

// Naive 3-D conv (NCDHW, OIDHW weights, groups) in double; per dim (d, h, w) the stride,
// dilation, begin pad and output size.
struct Dims3 {
  int64_t d, h, w;
};
HostTensor NaiveConv3d(const HostTensor& x, const HostTensor& w, const std::vector<float>* bias,
                       Dims3 stride, Dims3 dil, Dims3 pad, Dims3 out, int64_t group) {
  const int64_t n = x.shape[0], c = x.shape[1];
  const Dims3 in{x.shape[2], x.shape[3], x.shape[4]}, k{w.shape[2], w.shape[3], w.shape[4]};
  const int64_t m = w.shape[0], cg = w.shape[1];
  const std::vector<float> xv = x.Values<float>(), wv = w.Values<float>();
  std::vector<float> y(n * m * out.d * out.h * out.w);
  int64_t at = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t o = 0; o < m; ++o) {
      const int64_t g = o / (m / group);
      for (int64_t z = 0; z < out.d; ++z) {
        for (int64_t r = 0; r < out.h; ++r) {
          for (int64_t s = 0; s < out.w; ++s, ++at) {
            double acc = bias != nullptr ? (*bias)[o] : 0.0;
            for (int64_t ci = 0; ci < cg; ++ci) {
              for (int64_t a = 0; a < k.d; ++a) {
                for (int64_t b = 0; b < k.h; ++b) {
                  for (int64_t e = 0; e < k.w; ++e) {
                    const int64_t iz = z * stride.d - pad.d + a * dil.d;
                    const int64_t ih = r * stride.h - pad.h + b * dil.h;
                    const int64_t iw = s * stride.w - pad.w + e * dil.w;
                    if (iz < 0 || iz >= in.d || ih < 0 || ih >= in.h || iw < 0 || iw >= in.w) {
                      continue;
                    }
                    acc += static_cast<double>(
                               xv[(((i * c + g * cg + ci) * in.d + iz) * in.h + ih) * in.w + iw]) *
                           wv[(((o * cg + ci) * k.d + a) * k.h + b) * k.w + e];
                  }
                }
              }
            }
            y[at] = static_cast<float>(acc);
          }
        }
      }
    }
  }
  return HostTensor::Of<float>({n, m, out.d, out.h, out.w}, y);
}

// <a, b> in double over equal-length float tensors.
double Dot(const HostTensor& a, const HostTensor& b) {
  const auto av = a.Values<float>(), bv = b.Values<float>();
  double sum = 0;
  for (std::size_t i = 0; i < av.size(); ++i) sum += static_cast<double>(av[i]) * bv[i];
  return sum;
}

class ConvKernelsTest : public ::testing::TestWithParam<Device> {
 protected:
  std::vector<HostTensor> Run(OpKind op, const std::vector<HostTensor>& inputs,
                              const OpAttrs& attrs, int num_outputs = 1) {
    return RunAndCrossCheck(GetParam(), op, inputs, attrs, kAtol, kRtol, num_outputs);
  }
};

TEST_P(ConvKernelsTest, GroupedStridedDilatedConvMatchesNaive) {
  const HostTensor x = RandomTensor({2, 6, 13, 11}, 1);
  const HostTensor w = RandomTensor({4, 3, 3, 5}, 2, -1.0f, 1.0f);
  const std::vector<float> b = RandomFloats(4, 3);
  ConvAttrs a;
  a.group = 2;
  a.strides = {2, 1};
  a.dilations = {1, 2};
  a.pads = {1, 3, 0, 2};
  // Out: (13 + 1 - 3) / 2 + 1 = 6; (11 + 5 - 9) / 1 + 1 = 8.
  const auto got = Run(OpKind::kConv, {x, w, HostTensor::Of<float>({4}, b)}, a);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(AllClose(got[0], NaiveConv(x, w, &b, 2, 1, 1, 2, 1, 3, 6, 8, 2), kAtol, kRtol));
}

TEST_P(ConvKernelsTest, DepthwiseAndPointwiseMatchNaive) {
  const HostTensor x = RandomTensor({3, 5, 9, 10}, 4);
  const HostTensor dw = RandomTensor({10, 1, 3, 3}, 5, -1.0f, 1.0f);  // multiplier 2
  ConvAttrs a;
  a.group = 5;
  a.pads = {1, 1, 1, 1};
  a.strides = {1, 2};
  auto got = Run(OpKind::kConv, {x, dw}, a);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(AllClose(got[0], NaiveConv(x, dw, nullptr, 1, 2, 1, 1, 1, 1, 9, 5, 5), kAtol, kRtol));

  const HostTensor pw = RandomTensor({7, 5, 1, 1}, 6, -1.0f, 1.0f);
  got = Run(OpKind::kConv, {x, pw}, ConvAttrs{});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(
      AllClose(got[0], NaiveConv(x, pw, nullptr, 1, 1, 1, 1, 0, 0, 9, 10, 1), kAtol, kRtol));
}

TEST_P(ConvKernelsTest, ConvTransposeIsTheAdjointOfConv) {
  // <conv(x, w), y> == <x, conv_transpose(y, w)> for the same geometry, no bias.
  const HostTensor x = RandomTensor({1, 4, 9, 8}, 7);
  const HostTensor w = RandomTensor({6, 2, 3, 2}, 8, -1.0f, 1.0f);
  ConvAttrs a;
  a.group = 2;
  a.strides = {2, 3};
  a.pads = {1, 0, 1, 1};
  a.dilations = {1, 2};
  const auto cx = Run(OpKind::kConv, {x, w}, a);
  ASSERT_EQ(cx.size(), 1u);
  const HostTensor y = RandomTensor(cx[0].shape, 9);
  // Conv's W (M, C/g, k) is ConvTranspose's (C', M'/g, k) with C' = M, M' = C; with the
  // same pads the transposed output is X's 9 x 8 again.
  const ConvAttrs& t = a;
  const auto ty = Run(OpKind::kConvTranspose, {y, w}, t);
  ASSERT_EQ(ty.size(), 1u);
  ASSERT_EQ(ty[0].shape, x.shape);
  double lhs = 0, rhs = 0;
  const auto cv = cx[0].Values<float>(), yv = y.Values<float>();
  const auto xv = x.Values<float>(), tv = ty[0].Values<float>();
  for (std::size_t i = 0; i < cv.size(); ++i) lhs += static_cast<double>(cv[i]) * yv[i];
  for (std::size_t i = 0; i < xv.size(); ++i) rhs += static_cast<double>(xv[i]) * tv[i];
  EXPECT_NEAR(lhs, rhs, 1e-3 * std::abs(lhs) + 1e-3);
}

// W fed at run time (no packing at load): im2col over a volume, then the plain GEMM.
TEST_P(ConvKernelsTest, GroupedStridedDilatedConv3dMatchesNaive) {
  const HostTensor x = RandomTensor({2, 4, 5, 7, 6}, 21);
  const HostTensor w = RandomTensor({6, 2, 2, 3, 3}, 22, -1.0f, 1.0f);
  const std::vector<float> b = RandomFloats(6, 23);
  ConvAttrs a;
  a.group = 2;
  a.strides = {2, 1, 2};
  a.dilations = {1, 2, 1};
  a.pads = {1, 2, 1, 0, 1, 1};
  // Out: (5 + 1 - 2) / 2 + 1 = 3; (7 + 3 - 5) / 1 + 1 = 6; (6 + 2 - 3) / 2 + 1 = 3.
  const auto got = Run(OpKind::kConv, {x, w, HostTensor::Of<float>({6}, b)}, a);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(AllClose(got[0], NaiveConv3d(x, w, &b, {2, 1, 2}, {1, 2, 1}, {1, 2, 1}, {3, 6, 3}, 2),
                       kAtol, kRtol));
  // Depthwise over a volume: one input channel per group.
  const HostTensor dw = RandomTensor({8, 1, 3, 3, 3}, 24, -1.0f, 1.0f);
  ConvAttrs d;
  d.group = 4;
  d.pads = {1, 1, 1, 1, 1, 1};
  const auto got_dw = Run(OpKind::kConv, {x, dw}, d);
  ASSERT_EQ(got_dw.size(), 1u);
  EXPECT_TRUE(AllClose(got_dw[0],
                       NaiveConv3d(x, dw, nullptr, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {5, 7, 6}, 4),
                       kAtol, kRtol));
}

// Convs whose output grid is the input's (stride 1, "same" pads, some dilated and
// asymmetric): the CPU's im2col copies each tap's shifted image in one run there.
TEST_P(ConvKernelsTest, SameSizeConvsMatchNaive) {
  const HostTensor x = RandomTensor({2, 3, 4, 5, 6}, 28);
  const HostTensor w = RandomTensor({4, 3, 3, 2, 3}, 29, -1.0f, 1.0f);
  ConvAttrs a;
  a.dilations = {2, 1, 2};
  a.pads = {2, 0, 2, 2, 1, 2};  // 4 + 4 - 5 + 1 = 4; 5 + 1 - 2 + 1 = 5; 6 + 4 - 5 + 1 = 6
  const auto got = Run(OpKind::kConv, {x, w}, a);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(AllClose(got[0],
                       NaiveConv3d(x, w, nullptr, {1, 1, 1}, {2, 1, 2}, {2, 0, 2}, {4, 5, 6}, 1),
                       kAtol, kRtol));
  const HostTensor x2 = RandomTensor({1, 4, 7, 9}, 30);
  const HostTensor w2 = RandomTensor({6, 2, 3, 3}, 31, -1.0f, 1.0f);
  ConvAttrs b;
  b.group = 2;
  b.pads = {1, 1, 1, 1};
  const auto got2 = Run(OpKind::kConv, {x2, w2}, b);
  ASSERT_EQ(got2.size(), 1u);
  EXPECT_TRUE(
      AllClose(got2[0], NaiveConv(x2, w2, nullptr, 1, 1, 1, 1, 1, 1, 7, 9, 2), kAtol, kRtol));
}

TEST_P(ConvKernelsTest, ConvTranspose3dIsTheAdjointOfConv3d) {
  const HostTensor x = RandomTensor({1, 4, 5, 6, 5}, 25);
  const HostTensor w = RandomTensor({6, 2, 3, 2, 2}, 26, -1.0f, 1.0f);
  ConvAttrs a;
  a.group = 2;
  a.strides = {2, 1, 2};
  a.pads = {1, 0, 1, 1, 1, 0};
  a.dilations = {1, 2, 1};
  const auto cx = Run(OpKind::kConv, {x, w}, a);
  ASSERT_EQ(cx.size(), 1u);
  const HostTensor y = RandomTensor(cx[0].shape, 27);
  const auto ty = Run(OpKind::kConvTranspose, {y, w}, a);
  ASSERT_EQ(ty.size(), 1u);
  ASSERT_EQ(ty[0].shape, x.shape);
  const double lhs = Dot(cx[0], y), rhs = Dot(x, ty[0]);
  EXPECT_NEAR(lhs, rhs, 1e-3 * std::abs(lhs) + 1e-3);
}

TEST_P(ConvKernelsTest, MaxPoolPropagatesNaNAndGivesIndices) {
  std::vector<float> v = RandomFloats(2 * 16, 10);
  v[5] = std::nanf("");
  PoolAttrs a;
  a.kernel_shape = {2, 2};
  a.strides = {2, 2};
  const auto got = Run(OpKind::kMaxPool, {HostTensor::Of<float>({1, 2, 4, 4}, v)}, a, 2);
  ASSERT_EQ(got.size(), 2u);
  const auto y = got[0].Values<float>();
  const auto idx = got[1].Values<int64_t>();
  EXPECT_TRUE(std::isnan(y[0]));  // window of element 5 = (1, 1)
  EXPECT_EQ(idx[0], 5);
  // Second plane's indices count from the start of the whole tensor.
  for (int i = 4; i < 8; ++i) EXPECT_GE(idx[i], 16);
}

// Planes from 1 float to 57x57, enough of them that the CPU splits them over threads, the
// sums in double beside them; and a NaN poisons its own plane only.
TEST_P(ConvKernelsTest, GlobalAveragePoolMatchesADoubleSum) {
  for (const Shape& s :
       std::vector<Shape>{{2, 3, 1, 1}, {1, 5, 3, 7}, {2, 40, 57, 57}, {1, 96, 28, 28}}) {
    const HostTensor x = RandomTensor(s, 77, -1.0f, 3.0f);
    const std::vector<float> xv = x.Values<float>();
    const int64_t planes = s[0] * s[1], plane = s[2] * s[3];
    std::vector<float> want(planes);
    for (int64_t p = 0; p < planes; ++p) {
      double sum = 0.0;
      for (int64_t i = 0; i < plane; ++i) sum += xv[p * plane + i];
      want[p] = static_cast<float>(sum / static_cast<double>(plane));
    }
    const auto got = Run(OpKind::kGlobalAveragePool, {x}, NoAttrs{}, 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(AllClose(got[0], HostTensor::Of<float>({s[0], s[1], 1, 1}, want), 1e-6, 1e-5))
        << s[0] << "x" << s[1] << "x" << s[2] << "x" << s[3];
  }
  std::vector<float> v(2 * 9, 1.0f);
  v[4] = std::nanf("");
  const auto nan =
      Run(OpKind::kGlobalAveragePool, {HostTensor::Of<float>({1, 2, 3, 3}, v)}, NoAttrs{}, 1);
  ASSERT_EQ(nan.size(), 1u);
  EXPECT_TRUE(std::isnan(nan[0].Values<float>()[0]));
  EXPECT_EQ(nan[0].Values<float>()[1], 1.0f);
}

INSTANTIATE_TEST_SUITE_P(Devices, ConvKernelsTest, ::testing::ValuesIn(TestDevices()),
                         DeviceTestName);

TEST(ConvScratchTest, Im2colTakesScratchAndGivesItBack) {
  DeviceRunner runner(Device::Cpu());
  ConvAttrs a;
  a.pads = {1, 1, 1, 1};
  auto got = runner.Run(OpKind::kConv,
                        {RandomTensor({1, 3, 8, 8}, 11), RandomTensor({2, 3, 3, 3}, 12)}, a);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_GE(runner.scratch().peak_bytes(), 3u * 9 * 64 * sizeof(float));
  EXPECT_EQ(runner.scratch().held_bytes(), 0u);
}

TEST(ConvScratchTest, ScratchExhaustedIsResourceExhausted) {
  DeviceRunner runner(Device::Cpu());
  runner.scratch().set_limit(64);
  ConvAttrs a;
  a.pads = {1, 1, 1, 1};
  auto got = runner.Run(OpKind::kConv,
                        {RandomTensor({1, 3, 8, 8}, 13), RandomTensor({2, 3, 3, 3}, 14)}, a);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kResourceExhausted) << got.status();
}

TEST(ConvScratchTest, NoScratchAllocatorIsFailedPrecondition) {
  DeviceRunner runner(Device::Cpu());
  auto x = runner.Upload(RandomTensor({1, 2, 5, 5}, 15));
  auto w = runner.Upload(RandomTensor({2, 2, 3, 3}, 16));
  auto y = runner.Allocate({DType::kFp32, {1, 2, 3, 3}});
  ASSERT_TRUE(x.ok() && w.ok() && y.ok());
  const absl::Status s =
      RunKernel(OpKind::kConv, KernelContext::Cpu(), {*x, *w}, {*y}, ConvAttrs{});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
}

// Shape inference errors: code and a message that names the op.
absl::Status InferError(OpKind op, std::vector<TensorDesc> in, const OpAttrs& attrs) {
  auto r = InferOutputs(op, in, attrs);
  return r.ok() ? absl::OkStatus() : r.status();
}

void ExpectError(const absl::Status& s, absl::StatusCode code, const std::string& op) {
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(op)) << s;
}

TensorDesc F32(Shape s) { return {DType::kFp32, std::move(s)}; }

TEST(ConvRulesTest, ConvShapeErrors) {
  const auto inv = absl::StatusCode::kInvalidArgument;
  ExpectError(InferError(OpKind::kConv, {F32({1, 3, 5, 5}), F32({2, 2, 3, 3})}, ConvAttrs{}), inv,
              "Conv");
  ConvAttrs g2;
  g2.group = 2;
  ExpectError(InferError(OpKind::kConv, {F32({1, 4, 5, 5}), F32({3, 2, 3, 3})}, g2), inv, "Conv");
  ExpectError(
      InferError(OpKind::kConv, {F32({1, 3, 5, 5}), F32({2, 3, 3, 3}), F32({3})}, ConvAttrs{}), inv,
      "Conv");
  ExpectError(InferError(OpKind::kConv, {F32({1, 3, 2, 2}), F32({2, 3, 3, 3})}, ConvAttrs{}), inv,
              "Conv");
  ExpectError(InferError(OpKind::kConv, {F32({3, 5, 5}), F32({2, 3, 3, 3})}, ConvAttrs{}), inv,
              "Conv");
  ConvAttrs bad_strides;
  bad_strides.strides = {1};
  ExpectError(InferError(OpKind::kConv, {F32({1, 3, 5, 5}), F32({2, 3, 3, 3})}, bad_strides), inv,
              "strides");
  ConvAttrs zero_stride;
  zero_stride.strides = {0, 1};
  ExpectError(InferError(OpKind::kConv, {F32({1, 3, 5, 5}), F32({2, 3, 3, 3})}, zero_stride), inv,
              "Conv");
  ConvAttrs ks;
  ks.kernel_shape = {2, 2};
  ExpectError(InferError(OpKind::kConv, {F32({1, 3, 5, 5}), F32({2, 3, 3, 3})}, ks), inv,
              "kernel_shape");
  ExpectError(
      InferError(OpKind::kConv, {F32({1, 3, 4, 5, 5, 5}), F32({2, 3, 3, 3, 3, 3})}, ConvAttrs{}),
      absl::StatusCode::kUnimplemented, "Conv");
  ConvAttrs pads4;
  pads4.pads = {1, 1, 1, 1};
  ExpectError(InferError(OpKind::kConv, {F32({1, 3, 4, 5, 5}), F32({2, 3, 3, 3, 3})}, pads4), inv,
              "pads");
  ExpectError(InferError(OpKind::kConv,
                         {{DType::kFp16, {1, 3, 5, 5}}, {DType::kFp16, {2, 3, 3, 3}}}, ConvAttrs{}),
              absl::StatusCode::kUnimplemented, "Conv");
  ConvAttrs outpad;
  outpad.strides = {2, 2};
  outpad.output_padding = {2, 0};
  ExpectError(InferError(OpKind::kConvTranspose, {F32({1, 3, 5, 5}), F32({3, 2, 3, 3})}, outpad),
              inv, "ConvTranspose");
}

TEST(ConvRulesTest, AttributeErrors) {
  const auto inv = absl::StatusCode::kInvalidArgument;
  AttrMap bad_pad{{"auto_pad", std::string("SAME")}};
  ExpectError(BuildOpAttrs(OpKind::kConv, 13, bad_pad).status(), inv, "auto_pad");
  ExpectError(BuildOpAttrs(OpKind::kMaxPool, 13, {}).status(), inv, "kernel_shape");
  AttrMap order{{"kernel_shape", std::vector<int64_t>{2, 2}}, {"storage_order", int64_t{1}}};
  ExpectError(BuildOpAttrs(OpKind::kMaxPool, 13, order).status(), absl::StatusCode::kUnimplemented,
              "MaxPool");
  AttrMap dil{{"kernel_shape", std::vector<int64_t>{2, 2}},
              {"dilations", std::vector<int64_t>{2, 2}}};
  ExpectError(BuildOpAttrs(OpKind::kAveragePool, 13, dil).status(), inv, "AveragePool");
  AttrMap train{{"training_mode", int64_t{1}}};
  ExpectError(BuildOpAttrs(OpKind::kBatchNormalization, 15, train).status(),
              absl::StatusCode::kUnimplemented, "BatchNormalization");
  ExpectError(BuildOpAttrs(OpKind::kConv, 13, {{"group", int64_t{0}}}).status(), inv, "group");
}

TEST(ConvRulesTest, PoolAndNormShapeErrors) {
  const auto inv = absl::StatusCode::kInvalidArgument;
  PoolAttrs p;
  p.kernel_shape = {2, 2};
  p.pads = {2, 0, 0, 0};
  ExpectError(InferError(OpKind::kMaxPool, {F32({1, 1, 5, 5})}, p), inv, "MaxPool");
  p.pads = {};
  p.kernel_shape = {3};
  ExpectError(InferError(OpKind::kAveragePool, {F32({1, 1, 5, 5})}, p), inv, "AveragePool");
  ExpectError(InferError(OpKind::kGlobalAveragePool, {F32({2, 3})}, NoAttrs{}), inv,
              "GlobalAveragePool");
  ExpectError(
      InferError(OpKind::kBatchNormalization,
                 {F32({2, 3, 4}), F32({3}), F32({3}), F32({4}), F32({3})}, BatchNormAttrs{}),
      inv, "input_mean");
}

TEST(ConvRulesTest, ResizeErrors) {
  const auto inv = absl::StatusCode::kInvalidArgument;
  const auto unimpl = absl::StatusCode::kUnimplemented;
  auto scales = [](std::vector<double> v) {
    HostValue h;
    h.dtype = DType::kFp32;
    h.shape = {static_cast<int64_t>(v.size())};
    h.reals = std::move(v);
    return HostInputs({std::nullopt, std::nullopt, std::move(h)});
  };
  ExpectError(BuildOpAttrs(OpKind::kResize, 13, {}).status(), inv, "scales");
  auto cubic =
      BuildOpAttrs(OpKind::kResize, 13, {{"mode", std::string("cubic")}, {"cubic_coeff_a", -0.5f}},
                   scales({1, 1, 2, 2}));
  ASSERT_TRUE(cubic.ok()) << cubic.status();
  EXPECT_EQ(std::get<ResizeAttrs>(*cubic).mode, ResizeMode::kCubic);
  EXPECT_EQ(std::get<ResizeAttrs>(*cubic).cubic_a, -0.5f);
  ExpectError(BuildOpAttrs(OpKind::kResize, 13,
                           {{"coordinate_transformation_mode", std::string("tf_crop_and_resize")}},
                           scales({1, 1, 2, 2}))
                  .status(),
              unimpl, "tf_crop_and_resize");
  ExpectError(
      BuildOpAttrs(OpKind::kResize, 13, {{"nearest_mode", std::string("up")}}, scales({1, 2}))
          .status(),
      inv, "nearest_mode");
  ResizeAttrs a;
  a.scales = {1, 1, 2};
  ExpectError(InferError(OpKind::kResize, {F32({1, 2, 3, 4})}, a), inv, "Resize");
  a.scales = {1, 2, 2, 2};  // a channel dim may not change
  ExpectError(InferError(OpKind::kResize, {F32({1, 2, 3, 4})}, a), unimpl, "Resize");
  a.scales = {1, 1, 0, 2};
  ExpectError(InferError(OpKind::kResize, {F32({1, 2, 3, 4})}, a), inv, "Resize");
  // 5-D: depth, height and width may change (trilinear), N and C may not; cubic keeps
  // the depth.
  a.scales = {1, 1, 2, 2, 2};
  auto out = InferOutputs(OpKind::kResize, {F32({1, 2, 3, 4, 5})}, a);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, Shape({1, 2, 6, 8, 10}));
  a.scales = {1, 2, 1, 2, 2};
  ExpectError(InferError(OpKind::kResize, {F32({1, 2, 3, 4, 5})}, a), unimpl, "three");
  a.mode = ResizeMode::kCubic;
  a.scales = {1, 1, 2, 2, 2};
  ExpectError(InferError(OpKind::kResize, {F32({1, 2, 3, 4, 5})}, a), unimpl, "cubic");
  a.scales = {1, 1, 1, 2, 2};
  EXPECT_TRUE(InferError(OpKind::kResize, {F32({1, 2, 3, 4, 5})}, a).ok());
}

TEST_P(ConvKernelsTest, ResizeNearestUpsampleRepeatsPixels) {
  ResizeAttrs a;
  a.coord = ResizeCoord::kAsymmetric;
  a.nearest = ResizeNearest::kFloor;
  a.sizes = {1, 1, 4, 6};
  const auto got =
      Run(OpKind::kResize, {HostTensor::Of<float>({1, 1, 2, 3}, {1, 2, 3, 4, 5, 6})}, a);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].Values<float>(), std::vector<float>({1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3,  //
                                                        4, 4, 5, 5, 6, 6, 4, 4, 5, 5, 6, 6}));
}

// A grid point that is NaN or astronomically far out samples 0 in every mode and padding
// (no float-to-index conversion out of range); the point beside it still samples.
TEST_P(ConvKernelsTest, GridSampleOfANaNOrFarPointIsZero) {
  const HostTensor x = RandomTensor({1, 2, 3, 4}, 31);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const HostTensor grid =
      HostTensor::Of<float>({1, 1, 3, 2}, {nan, 0.0f, 1e20f, -1e20f, 0.0f, 0.0f});
  for (auto mode :
       {GridSampleMode::kBilinear, GridSampleMode::kNearest, GridSampleMode::kBicubic}) {
    for (auto pad :
         {GridSamplePadding::kZeros, GridSamplePadding::kBorder, GridSamplePadding::kReflection}) {
      GridSampleAttrs a;
      a.mode = mode;
      a.padding = pad;
      const auto got = Run(OpKind::kGridSample, {x, grid}, a);
      ASSERT_EQ(got.size(), 1u);
      const std::vector<float> v = got[0].Values<float>();
      ASSERT_EQ(v.size(), 6u);
      for (int ch = 0; ch < 2; ++ch) {
        EXPECT_EQ(v[ch * 3 + 0], 0.0f);
        EXPECT_EQ(v[ch * 3 + 1], 0.0f);
        EXPECT_TRUE(std::isfinite(v[ch * 3 + 2]));
      }
    }
  }
}

TEST(ConvRulesTest, GeometryOfAutoPadAndCeilMode) {
  ConvAttrs same;
  same.auto_pad = AutoPad::kSameUpper;
  same.strides = {2, 2};
  auto out = InferOutputs(OpKind::kConv, {F32({1, 1, 7, 8}), F32({1, 1, 3, 3})}, same);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, Shape({1, 1, 4, 4}));
  PoolAttrs ceil;
  ceil.kernel_shape = {3, 3};
  ceil.strides = {2, 2};
  ceil.ceil_mode = true;
  out = InferOutputs(OpKind::kMaxPool, {F32({1, 1, 8, 7})}, ceil);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, Shape({1, 1, 4, 3}));  // floor mode would give 3 x 3
  ConvAttrs t;
  t.strides = {2, 2};
  t.auto_pad = AutoPad::kSameUpper;
  out = InferOutputs(OpKind::kConvTranspose, {F32({1, 2, 3, 4}), F32({2, 3, 3, 3})}, t);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, Shape({1, 3, 6, 8}));
  // 3-D: depth is the first spatial dim of every attribute list.
  ConvAttrs v;
  v.strides = {1, 2, 2};
  v.pads = {1, 3, 3, 1, 3, 3};
  out = InferOutputs(OpKind::kConv, {F32({2, 3, 8, 112, 112}), F32({64, 3, 3, 7, 7})}, v);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, Shape({2, 64, 8, 56, 56}));
  PoolAttrs p3;
  p3.kernel_shape = {1, 3, 3};
  p3.strides = {1, 2, 2};
  p3.pads = {0, 1, 1, 0, 1, 1};
  out = InferOutputs(OpKind::kMaxPool, {F32({1, 4, 5, 9, 8})}, p3);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, Shape({1, 4, 5, 5, 4}));
  ConvAttrs up;
  up.strides = {2, 2, 2};
  out = InferOutputs(OpKind::kConvTranspose, {F32({1, 16, 4, 5, 6}), F32({16, 8, 2, 2, 2})}, up);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, Shape({1, 8, 8, 10, 12}));
}

}  // namespace
}  // namespace ndserve::kernels::testing
