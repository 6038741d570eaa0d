// Numeric kernels (Gemm, MatMul, binary and unary elementwise, Softmax,
// LayerNormalization, ReduceSum/ReduceMean) on every device present, on shapes larger and
// less regular than the fixtures', against naive double-precision references; on a GPU
// each result is also compared with the CPU kernel's.
//
// Tolerances (|got - want| <= atol + rtol * |want|):
//   Gemm / MatMul            1e-5 + 1e-4 rel  (sums of K products, order differs)
//   Add / Sub / Mul / Div     exact            (one IEEE operation)
//   Sigmoid / Tanh / Erf      1e-6 + 1e-5 rel  (libm vs CUDA intrinsics differ by ulps)
//   Softmax                   1e-6 + 1e-5 rel
//   LayerNormalization        1e-5 + 1e-4 rel
//   ReduceSum / ReduceMean    1e-5 + 1e-5 rel
#include <cmath>
#include <limits>
#include <optional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/kernels/kernel_test_util.h"
#include "tests/unit/kernels/naive_gemm.h"

namespace ndserve::kernels::testing {
namespace {

constexpr double kGemmAtol = 1e-5, kGemmRtol = 1e-4;

class MathKernelsTest : public ::testing::TestWithParam<Device> {
 protected:
  std::vector<HostTensor> Run(OpKind op, const std::vector<HostTensor>& inputs,
                              const OpAttrs& attrs, double atol, double rtol, int num_outputs = 1) {
    return RunAndCrossCheck(GetParam(), op, inputs, attrs, atol, rtol, num_outputs);
  }
};

TEST_P(MathKernelsTest, GemmAllTransposesAndBiasShapes) {
  const int64_t m = 37, n = 53, k = 29;
  int seed = 10;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (const std::optional<Shape>& c_opt :
           {std::optional<Shape>(), std::optional(Shape{}), std::optional(Shape{n}),
            std::optional(Shape{m, 1}), std::optional(Shape{m, n}), std::optional(Shape{1})}) {
        const bool with_c = c_opt.has_value();
        const Shape c_shape = c_opt.value_or(Shape{});
        const HostTensor a = RandomTensor(ta ? Shape{k, m} : Shape{m, k}, ++seed);
        const HostTensor b = RandomTensor(tb ? Shape{n, k} : Shape{k, n}, ++seed);
        const HostTensor c = RandomTensor(c_shape, ++seed);
        const GemmAttrs attrs{0.75f, 1.5f, ta, tb};
        std::vector<HostTensor> in = {a, b};
        if (with_c) in.push_back(c);
        const auto got = Run(OpKind::kGemm, in, attrs, kGemmAtol, kGemmRtol);
        ASSERT_EQ(got.size(), 1u);
        const std::vector<float> cv = c.Values<float>();
        const HostTensor want = HostTensor::Of<float>(
            {m, n}, NaiveGemm(a.Values<float>(), b.Values<float>(), with_c ? &cv : nullptr, c_shape,
                              m, n, k, ta, tb, 0.75f, 1.5f));
        EXPECT_TRUE(AllClose(got[0], want, kGemmAtol, kGemmRtol))
            << "transA " << ta << " transB " << tb << " C " << ShapeToString(c_shape);
      }
    }
  }
}

TEST_P(MathKernelsTest, GemmEdgeCases) {
  // K == 0: the product is empty, Y is beta * C.
  const HostTensor c = RandomTensor({3, 4}, 1);
  auto got =
      Run(OpKind::kGemm, {HostTensor::Of<float>({3, 0}, {}), HostTensor::Of<float>({0, 4}, {}), c},
          GemmAttrs{1.0f, 2.0f, false, false}, 0, 0);
  std::vector<float> twice = c.Values<float>();
  for (float& v : twice) v *= 2;
  EXPECT_TRUE(AllClose(got[0], HostTensor::Of<float>({3, 4}, twice), 0, 0));
  // beta == 0 ignores C even when it holds NaN.
  const HostTensor nan_c = HostTensor::Of<float>({4}, std::vector<float>(4, NAN));
  const HostTensor a = RandomTensor({3, 5}, 2), b = RandomTensor({5, 4}, 3);
  got =
      Run(OpKind::kGemm, {a, b, nan_c}, GemmAttrs{1.0f, 0.0f, false, false}, kGemmAtol, kGemmRtol);
  for (float v : got[0].Values<float>()) EXPECT_FALSE(std::isnan(v));
}

// numpy matmul reference over broadcast batch dims.
HostTensor NaiveMatMul(const HostTensor& a, const HostTensor& b) {
  const Shape& sa = a.shape;
  const Shape& sb = b.shape;
  const int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  const Shape ab(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  const Shape batch = *BroadcastShapes(ab, bb);
  const Shape astr = BroadcastStrides(ab, batch), bstr = BroadcastStrides(bb, batch);
  const int64_t nb = NumElements(batch);
  const std::vector<float> av = a.Values<float>(), bv = b.Values<float>();
  std::vector<float> y(nb * m * n);
  for (int64_t t = 0; t < nb; ++t) {
    int64_t oa = 0, ob = 0, rest = t;
    for (int d = static_cast<int>(batch.size()) - 1; d >= 0; --d) {
      oa += (rest % batch[d]) * astr[d];
      ob += (rest % batch[d]) * bstr[d];
      rest /= batch[d];
    }
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) {
          s += static_cast<double>(av[oa * m * k + i * k + p]) * bv[ob * k * n + p * n + j];
        }
        y[t * m * n + i * n + j] = static_cast<float>(s);
      }
    }
  }
  Shape out = batch;
  out.push_back(m);
  out.push_back(n);
  return HostTensor::Of<float>(out, y);
}

TEST_P(MathKernelsTest, MatMulBroadcastBatches) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 1, 5, 7}, {4, 7, 6}},           // both sides broadcast, two batch dims
      {{2, 3, 17, 9}, {9, 11}},            // B unbatched: folds into one GEMM
      {{5, 9}, {2, 3, 9, 4}},              // A unbatched
      {{2, 2, 3, 8, 8}, {2, 1, 3, 8, 8}},  // three batch dims, middle one broadcast
      // Attention's per-head product: small, so RowGemm row blocks of 32 on ParallelFor,
      // with a 6-row tail block and a 70-column one (64 + 6).
      {{2, 3, 70, 24}, {2, 3, 24, 70}},
      {{1, 1, 33}, {4, 33, 5}},           // one row per product, A broadcast
      {{2, 130, 100}, {2, 100, 90}},      // past kSmallProduct: one sgemm per product
  };
  int seed = 100;
  for (const auto& [sa, sb] : cases) {
    const HostTensor a = RandomTensor(sa, ++seed), b = RandomTensor(sb, ++seed);
    const auto got = Run(OpKind::kMatMul, {a, b}, NoAttrs{}, kGemmAtol, kGemmRtol);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(AllClose(got[0], NaiveMatMul(a, b), kGemmAtol, kGemmRtol))
        << ShapeToString(sa) << " x " << ShapeToString(sb);
  }
}

TEST_P(MathKernelsTest, BinaryBroadcastMatchesNaive) {
  const Shape sa = {4, 1, 33, 7}, sb = {5, 1, 7};
  const HostTensor a = RandomTensor(sa, 7), b = RandomTensor(sb, 8, 0.5f, 2.0f);
  const Shape out = *BroadcastShapes(sa, sb);
  const Shape astr = BroadcastStrides(sa, out), bstr = BroadcastStrides(sb, out);
  const std::vector<float> av = a.Values<float>(), bv = b.Values<float>();
  for (OpKind op : {OpKind::kAdd, OpKind::kSub, OpKind::kMul, OpKind::kDiv}) {
    std::vector<float> want(NumElements(out));
    for (int64_t i = 0; i < static_cast<int64_t>(want.size()); ++i) {
      int64_t oa = 0, ob = 0, rest = i;
      for (int d = static_cast<int>(out.size()) - 1; d >= 0; --d) {
        oa += (rest % out[d]) * astr[d];
        ob += (rest % out[d]) * bstr[d];
        rest /= out[d];
      }
      const float x = av[oa], y = bv[ob];
      want[i] = op == OpKind::kAdd   ? x + y
                : op == OpKind::kSub ? x - y
                : op == OpKind::kMul ? x * y
                                     : x / y;
    }
    const auto got = Run(op, {a, b}, NoAttrs{}, 0, 0);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(AllClose(got[0], HostTensor::Of<float>(out, want), 0, 0)) << OpKindName(op);
  }
}

// Large enough (over 512K elements) that the CPU spreads the rows over ParallelFor in
// chunks that start part way through the broadcast dims (a walker that seeks to its first
// row): a score scaling by a scalar and a mask add ([1, 1, 1, seq]) as attention's, a
// broadcast in the middle with an odd row length, and a small one. Every result exact.
TEST_P(MathKernelsTest, LargeBinaryBroadcastsMatchNaive) {
  struct Case {
    Shape a, b;
  };
  for (const Case& c : {Case{{1, 8, 520, 128}, {}}, Case{{1, 8, 520, 128}, {1, 1, 1, 128}},
                        Case{{3, 1, 370, 129}, {5, 1, 129}}, Case{{7}, {61, 7}}}) {
    const HostTensor a = RandomTensor(c.a, 9), b = RandomTensor(c.b, 10, 0.5f, 2.0f);
    const Shape out = *BroadcastShapes(c.a, c.b);
    const Shape astr = BroadcastStrides(c.a, out), bstr = BroadcastStrides(c.b, out);
    const std::vector<float> av = a.Values<float>(), bv = b.Values<float>();
    for (OpKind op : {OpKind::kAdd, OpKind::kSub, OpKind::kMul, OpKind::kDiv}) {
      std::vector<float> want(NumElements(out));
      for (int64_t i = 0; i < static_cast<int64_t>(want.size()); ++i) {
        int64_t oa = 0, ob = 0, rest = i;
        for (int d = static_cast<int>(out.size()) - 1; d >= 0; --d) {
          oa += (rest % out[d]) * astr[d];
          ob += (rest % out[d]) * bstr[d];
          rest /= out[d];
        }
        const float x = av[oa], y = bv[ob];
        want[i] = op == OpKind::kAdd   ? x + y
                  : op == OpKind::kSub ? x - y
                  : op == OpKind::kMul ? x * y
                                       : x / y;
      }
      const auto got = Run(op, {a, b}, NoAttrs{}, 0, 0);
      ASSERT_EQ(got.size(), 1u);
      EXPECT_TRUE(AllClose(got[0], HostTensor::Of<float>(out, want), 0, 0))
          << OpKindName(op) << " " << ShapeToString(c.a) << " " << ShapeToString(c.b);
    }
  }
}

TEST_P(MathKernelsTest, IntegerDivisionIsDefinedEverywhere) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  const HostTensor a = HostTensor::Of<int64_t>({5}, {7, -7, 5, kMin, 9});
  const HostTensor b = HostTensor::Of<int64_t>({5}, {2, 2, 0, -1, -4});
  const auto got = Run(OpKind::kDiv, {a, b}, NoAttrs{}, 0, 0);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(got[0].Values<int64_t>(), ::testing::ElementsAre(3, -3, 0, kMin, -2));
  const HostTensor c = HostTensor::Of<int32_t>({2}, {std::numeric_limits<int32_t>::max(), 1});
  const auto sum = Run(OpKind::kAdd, {c, HostTensor::Of<int32_t>({}, {1})}, NoAttrs{}, 0, 0);
  EXPECT_THAT(sum[0].Values<int32_t>(),
              ::testing::ElementsAre(std::numeric_limits<int32_t>::min(), 2));
}

TEST_P(MathKernelsTest, UnaryMatchesLibm) {
  const HostTensor x = RandomTensor({1000}, 11, -8.0f, 8.0f);
  const std::vector<float> xv = x.Values<float>();
  struct Case {
    OpKind op;
    double (*fn)(double);
  };
  const Case cases[] = {
      {OpKind::kRelu, [](double v) { return v < 0 ? 0.0 : v; }},
      {OpKind::kSigmoid, [](double v) { return 1.0 / (1.0 + std::exp(-v)); }},
      {OpKind::kTanh, [](double v) { return std::tanh(v); }},
      {OpKind::kErf, [](double v) { return std::erf(v); }},
  };
  for (const Case& c : cases) {
    std::vector<float> want(xv.size());
    for (std::size_t i = 0; i < xv.size(); ++i) want[i] = static_cast<float>(c.fn(xv[i]));
    const auto got = Run(c.op, {x}, NoAttrs{}, 1e-6, 1e-5);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(AllClose(got[0], HostTensor::Of<float>({1000}, want), 1e-6, 1e-5))
        << OpKindName(c.op);
  }
  // Relu keeps NaN; Sigmoid saturates without NaN at the extremes.
  const HostTensor edge = HostTensor::Of<float>({3}, {NAN, -1000.0f, 1000.0f});
  EXPECT_TRUE(std::isnan(Run(OpKind::kRelu, {edge}, NoAttrs{}, 0, 0)[0].Values<float>()[0]));
  EXPECT_THAT(Run(OpKind::kSigmoid, {edge}, NoAttrs{}, 0, 0)[0].Values<float>(),
              ::testing::ElementsAre(::testing::IsNan(), 0.0f, 1.0f));
}

HostTensor NaiveSoftmax(const HostTensor& x, int64_t axis) {
  const Shape& s = x.shape;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= s[i];
  for (std::size_t i = axis + 1; i < s.size(); ++i) inner *= s[i];
  const int64_t n = s[axis];
  const std::vector<float> xv = x.Values<float>();
  std::vector<float> y(xv.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      double mx = -INFINITY, sum = 0;
      for (int64_t i = 0; i < n; ++i) mx = std::max<double>(mx, xv[(o * n + i) * inner + j]);
      for (int64_t i = 0; i < n; ++i) sum += std::exp(xv[(o * n + i) * inner + j] - mx);
      for (int64_t i = 0; i < n; ++i) {
        y[(o * n + i) * inner + j] =
            static_cast<float>(std::exp(xv[(o * n + i) * inner + j] - mx) / sum);
      }
    }
  }
  return HostTensor::Of<float>(s, y);
}

TEST_P(MathKernelsTest, SoftmaxWideRowsAndInnerAxes) {
  const HostTensor wide = RandomTensor({7, 1000}, 21, -10.0f, 10.0f);
  auto got = Run(OpKind::kSoftmax, {wide}, SoftmaxAttrs{-1}, 1e-6, 1e-5);
  EXPECT_TRUE(AllClose(got[0], NaiveSoftmax(wide, 1), 1e-6, 1e-5));
  const HostTensor x = RandomTensor({3, 40, 5, 2}, 22, -10.0f, 10.0f);
  for (int64_t axis : {0, 1, 2}) {
    got = Run(OpKind::kSoftmax, {x}, SoftmaxAttrs{axis}, 1e-6, 1e-5);
    EXPECT_TRUE(AllClose(got[0], NaiveSoftmax(x, axis), 1e-6, 1e-5)) << "axis " << axis;
  }
}

// Last-axis rows whose length is not a multiple of the eight-lane max (1, 7, 9, 131) or is
// attention's 128, the largest value in the vector part or in the tail, and masked
// entries (-inf and a large negative bias) as an attention mask makes them.
TEST_P(MathKernelsTest, SoftmaxRowsAtOddLengthsAndMasks) {
  for (int64_t n : {1, 7, 9, 128, 131}) {
    HostTensor x = RandomTensor({5, n}, 23, -8.0f, 8.0f);
    std::vector<float> v = x.Values<float>();
    v[n - 1] = 30.0f;  // row 0: the max in the tail
    v[n + 0] = 30.0f;  // row 1: the max first
    if (n > 1) {
      v[2 * n + n / 2] = -std::numeric_limits<float>::infinity();  // row 2: one masked
      v[3 * n + 1] = -10000.0f;                                    // row 3: a large bias
    }
    x = HostTensor::Of<float>({5, n}, v);
    const auto got = Run(OpKind::kSoftmax, {x}, SoftmaxAttrs{-1}, 1e-6, 1e-5);
    EXPECT_TRUE(AllClose(got[0], NaiveSoftmax(x, 1), 1e-6, 1e-5)) << "n " << n;
  }
}

TEST_P(MathKernelsTest, LayerNormWithStatistics) {
  const int64_t rows = 6, cols = 1000;
  const HostTensor x = RandomTensor({2, 3, cols}, 31, -3.0f, 5.0f);
  const HostTensor scale = RandomTensor({cols}, 32), bias = RandomTensor({cols}, 33);
  const auto got =
      Run(OpKind::kLayerNormalization, {x, scale, bias}, LayerNormAttrs{-1, 1e-5f}, 1e-5, 1e-4, 3);
  ASSERT_EQ(got.size(), 3u);
  const std::vector<float> xv = x.Values<float>(), sv = scale.Values<float>(),
                           bv = bias.Values<float>();
  std::vector<float> y(xv.size()), mean(rows), inv(rows);
  for (int64_t r = 0; r < rows; ++r) {
    double m = 0, v = 0;
    for (int64_t i = 0; i < cols; ++i) m += xv[r * cols + i];
    m /= cols;
    for (int64_t i = 0; i < cols; ++i) v += (xv[r * cols + i] - m) * (xv[r * cols + i] - m);
    v /= cols;
    const double iv = 1.0 / std::sqrt(v + 1e-5);
    for (int64_t i = 0; i < cols; ++i) {
      y[r * cols + i] = static_cast<float>((xv[r * cols + i] - m) * iv * sv[i] + bv[i]);
    }
    mean[r] = static_cast<float>(m);
    inv[r] = static_cast<float>(iv);
  }
  EXPECT_TRUE(AllClose(got[0], HostTensor::Of<float>(x.shape, y), 1e-5, 1e-4));
  EXPECT_TRUE(AllClose(got[1], HostTensor::Of<float>({2, 3, 1}, mean), 1e-5, 1e-4));
  EXPECT_TRUE(AllClose(got[2], HostTensor::Of<float>({2, 3, 1}, inv), 1e-5, 1e-4));
}

TEST_P(MathKernelsTest, ReduceOverAxisSubsets) {
  const Shape s = {3, 4, 5, 6};
  const HostTensor x = RandomTensor(s, 41);
  const std::vector<float> xv = x.Values<float>();
  const Shape strides = ContiguousStrides(s);
  for (const std::vector<int64_t>& axes :
       {std::vector<int64_t>{0, 2}, {1, 3}, {3}, {0}, {1, 2}, {0, 1, 2, 3}}) {
    for (bool mean : {false, true}) {
      Shape out;
      for (int d = 0; d < 4; ++d) {
        out.push_back(std::count(axes.begin(), axes.end(), d) ? 1 : s[d]);
      }
      std::vector<double> acc(NumElements(out), 0.0);
      const Shape ostr = ContiguousStrides(out);
      int64_t count = 1;
      for (int64_t a : axes) count *= s[a];
      for (int64_t i = 0; i < NumElements(s); ++i) {
        int64_t o = 0;
        for (int d = 0; d < 4; ++d) {
          const int64_t idx = (i / strides[d]) % s[d];
          if (!std::count(axes.begin(), axes.end(), d)) o += idx * ostr[d];
        }
        acc[o] += xv[i];
      }
      std::vector<float> want(acc.size());
      for (std::size_t i = 0; i < acc.size(); ++i) {
        want[i] = static_cast<float>(mean ? acc[i] / count : acc[i]);
      }
      const auto got = Run(mean ? OpKind::kReduceMean : OpKind::kReduceSum, {x},
                           ReduceAttrs{axes, true, false}, 1e-5, 1e-5);
      ASSERT_EQ(got.size(), 1u);
      EXPECT_TRUE(AllClose(got[0], HostTensor::Of<float>(out, want), 1e-5, 1e-5))
          << (mean ? "mean" : "sum") << " axes " << ShapeToString(axes);
    }
  }
}

// A middle axis reduced with the innermost kept takes a path of its own on the CPU
// ([outer, r, inner] summed over r); odd sizes, no outer dim, a bag of one, several
// middle axes merged into one.
TEST_P(MathKernelsTest, ReduceMiddleAxisAtOddShapes) {
  struct Case {
    Shape shape;
    std::vector<int64_t> axes;
  };
  for (const Case& c : {Case{{5, 7, 3}, {1}}, Case{{9, 13}, {0}}, Case{{1, 9, 13}, {1}},
                        Case{{6, 1, 11}, {1}}, Case{{3, 2, 5, 17}, {1, 2}}, Case{{2, 3, 1}, {1}}}) {
    const HostTensor x = RandomTensor(c.shape, 53);
    const std::vector<float> xv = x.Values<float>();
    int64_t r = 1, inner = 1, outer = 1;
    for (int64_t d = 0; d < static_cast<int64_t>(c.shape.size()); ++d) {
      if (std::count(c.axes.begin(), c.axes.end(), d)) {
        r *= c.shape[d];
      } else if (d < c.axes.front()) {
        outer *= c.shape[d];
      } else {
        inner *= c.shape[d];
      }
    }
    Shape out_shape;
    for (int64_t d = 0; d < static_cast<int64_t>(c.shape.size()); ++d) {
      if (!std::count(c.axes.begin(), c.axes.end(), d)) out_shape.push_back(c.shape[d]);
    }
    for (bool mean : {false, true}) {
      std::vector<float> want(outer * inner);
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          double s = 0;
          for (int64_t k = 0; k < r; ++k) s += xv[(o * r + k) * inner + i];
          want[o * inner + i] = static_cast<float>(mean ? s / r : s);
        }
      }
      const auto got = Run(mean ? OpKind::kReduceMean : OpKind::kReduceSum, {x},
                           ReduceAttrs{c.axes, false, false}, 1e-5, 1e-5);
      ASSERT_EQ(got.size(), 1u);
      EXPECT_TRUE(AllClose(got[0], HostTensor::Of<float>(out_shape, want), 1e-5, 1e-5))
          << (mean ? "mean " : "sum ") << ShapeToString(c.shape) << " axes "
          << ShapeToString(c.axes);
    }
  }
}

TEST_P(MathKernelsTest, EmbeddingBagMean) {
  // The recsys pattern: [batch, bag, dim] averaged over the bag.
  const HostTensor x = RandomTensor({64, 8, 32}, 51);
  const auto got = Run(OpKind::kReduceMean, {x}, ReduceAttrs{{1}, false, false}, 1e-5, 1e-5);
  ASSERT_EQ(got.size(), 1u);
  const std::vector<float> xv = x.Values<float>();
  std::vector<float> want(64 * 32);
  for (int b = 0; b < 64; ++b) {
    for (int d = 0; d < 32; ++d) {
      double s = 0;
      for (int i = 0; i < 8; ++i) s += xv[(b * 8 + i) * 32 + d];
      want[b * 32 + d] = static_cast<float>(s / 8);
    }
  }
  EXPECT_TRUE(AllClose(got[0], HostTensor::Of<float>({64, 32}, want), 1e-5, 1e-5));
}

INSTANTIATE_TEST_SUITE_P(Devices, MathKernelsTest, ::testing::ValuesIn(TestDevices()),
                         DeviceTestName);

}  // namespace
}  // namespace ndserve::kernels::testing
