// LSTM, GRU and RNN against a plain double-precision reference written from the ONNX
// operator definitions, over every path of the CPU kernel: batch at and above
// kRowGemmMaxRows (RowGemm or sgemm for the step product), hidden sizes that hit every
// RowGemm column block and its single-column tail, both directions and bidirectional,
// sequence_lens with short and empty entries, initial states, peepholes, clip and
// GRU's linear_before_reset. Also RowGemm itself and the gate functions of lane_math.h.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/lane_math.h"
#include "kernels/cpu/row_gemm.h"
#include "kernels/node_attrs.h"
#include "kernels/optional_inputs.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ndserve::kernels::testing {
namespace {

struct Case {
  OpKind op = OpKind::kLSTM;
  std::string direction = "forward";
  int64_t batch = 1, hidden = 13;
  bool lens = false, initial = false, peep = false, lbr = false;
  float clip = 0.0f;

  int gates() const { return op == OpKind::kLSTM ? 4 : op == OpKind::kGRU ? 3 : 1; }
  int64_t dirs() const { return direction == "bidirectional" ? 2 : 1; }
  std::string Name() const {
    return absl::StrFormat("%s %s b%d h%d%s%s%s%s clip %g", OpKindName(op), direction, batch,
                           hidden, lens ? " lens" : "", initial ? " initial" : "",
                           peep ? " peep" : "", lbr ? " lbr" : "", clip);
  }
};

constexpr int64_t kSeq = 5, kInput = 7;

double Sig(double x) { return 1.0 / (1.0 + std::exp(-x)); }

struct Inputs {
  std::vector<float> x, w, r, b, h0, c0, p;
  std::vector<int32_t> lens;
};

// Y [seq, dirs, batch, H], Y_h and Y_c [dirs, batch, H], straight from the ONNX formulas.
std::vector<std::vector<float>> Reference(const Case& c, const Inputs& in) {
  const int64_t H = c.hidden, G = c.gates(), D = c.dirs(), B = c.batch;
  std::vector<float> y(kSeq * D * B * H, 0.0f), yh(D * B * H), yc(D * B * H);
  auto cl = [&](double v) {
    return c.clip > 0 ? std::min<double>(std::max<double>(v, -c.clip), c.clip) : v;
  };
  for (int64_t d = 0; d < D; ++d) {
    const bool reverse = c.direction == "reverse" || d == 1;
    const float* w = in.w.data() + d * G * H * kInput;
    const float* r = in.r.data() + d * G * H * H;
    const float* wb = in.b.data() + d * 2 * G * H;
    const float* rb = wb + G * H;
    for (int64_t b = 0; b < B; ++b) {
      std::vector<double> h(H, 0.0), cell(H, 0.0);
      if (c.initial) {
        for (int64_t j = 0; j < H; ++j) {
          h[j] = in.h0[(d * B + b) * H + j];
          if (c.op == OpKind::kLSTM) cell[j] = in.c0[(d * B + b) * H + j];
        }
      }
      const int64_t len = c.lens ? in.lens[b] : kSeq;
      for (int64_t s = 0; s < len; ++s) {
        const int64_t t = reverse ? len - 1 - s : s;
        const float* x = in.x.data() + (t * B + b) * kInput;
        // Row g of W x + Wb and of R v + Rb.
        auto wx = [&](int64_t g) {
          double v = wb[g];
          for (int64_t k = 0; k < kInput; ++k) v += double{w[g * kInput + k]} * x[k];
          return v;
        };
        auto rv = [&](int64_t g, const std::vector<double>& v) {
          double acc = rb[g];
          for (int64_t k = 0; k < H; ++k) acc += double{r[g * H + k]} * v[k];
          return acc;
        };
        std::vector<double> nh(H), nc(H);
        if (c.op == OpKind::kLSTM) {  // i, o, f, c
          const float* p = in.p.data() + d * 3 * H;
          for (int64_t j = 0; j < H; ++j) {
            const double pi = c.peep ? p[j] * cell[j] : 0.0,
                         pf = c.peep ? p[2 * H + j] * cell[j] : 0.0;
            const double i = Sig(cl(wx(j) + rv(j, h) + pi));
            const double f = Sig(cl(wx(2 * H + j) + rv(2 * H + j, h) + pf));
            const double cc = std::tanh(cl(wx(3 * H + j) + rv(3 * H + j, h)));
            nc[j] = f * cell[j] + i * cc;
            const double po = c.peep ? p[H + j] * nc[j] : 0.0;
            const double o = Sig(cl(wx(H + j) + rv(H + j, h) + po));
            nh[j] = o * std::tanh(nc[j]);
          }
        } else if (c.op == OpKind::kGRU) {  // z, r, h
          std::vector<double> rg(H), rh(H);
          for (int64_t j = 0; j < H; ++j) {
            rg[j] = Sig(cl(wx(H + j) + rv(H + j, h)));
            rh[j] = rg[j] * h[j];
          }
          for (int64_t j = 0; j < H; ++j) {
            const double z = Sig(cl(wx(j) + rv(j, h)));
            const double hh = c.lbr ? std::tanh(cl(wx(2 * H + j) + rg[j] * rv(2 * H + j, h)))
                                    : std::tanh(cl(wx(2 * H + j) + rv(2 * H + j, rh)));
            nh[j] = (1 - z) * hh + z * h[j];
          }
        } else {
          for (int64_t j = 0; j < H; ++j) nh[j] = std::tanh(cl(wx(j) + rv(j, h)));
        }
        h = nh;
        if (c.op == OpKind::kLSTM) cell = nc;
        for (int64_t j = 0; j < H; ++j) y[((t * D + d) * B + b) * H + j] = static_cast<float>(h[j]);
      }
      for (int64_t j = 0; j < H; ++j) {
        yh[(d * B + b) * H + j] = static_cast<float>(h[j]);
        yc[(d * B + b) * H + j] = static_cast<float>(cell[j]);
      }
    }
  }
  return {y, yh, yc};
}

void Check(const Case& c) {
  SCOPED_TRACE(c.Name());
  const int64_t H = c.hidden, G = c.gates(), D = c.dirs(), B = c.batch;
  Inputs in;
  in.x = RandomFloats(kSeq * B * kInput, 11, -1, 1);
  in.w = RandomFloats(D * G * H * kInput, 12, -0.5, 0.5);
  in.r = RandomFloats(D * G * H * H, 13, -0.3, 0.3);
  in.b = RandomFloats(D * 2 * G * H, 14, -0.5, 0.5);
  in.h0 = RandomFloats(D * B * H, 15, -1, 1);
  in.c0 = RandomFloats(D * B * H, 16, -1, 1);
  in.p = RandomFloats(D * 3 * H, 17, -0.5, 0.5);
  for (int64_t b = 0; b < B; ++b)
    in.lens.push_back(c.lens ? static_cast<int32_t>((b * 3) % (kSeq + 1)) : kSeq);
  if (c.lens) in.lens[0] = kSeq;

  std::vector<HostTensor> inputs = {HostTensor::Of<float>({kSeq, B, kInput}, in.x),
                                    HostTensor::Of<float>({D, G * H, kInput}, in.w),
                                    HostTensor::Of<float>({D, G * H, H}, in.r),
                                    HostTensor::Of<float>({D, 2 * G * H}, in.b)};
  std::vector<std::string> names = {"X", "W", "R", "B"};
  auto add = [&](bool present, const char* name, HostTensor t) {
    names.push_back(present ? name : "");
    if (present) inputs.push_back(std::move(t));
  };
  add(c.lens, "lens", HostTensor::Of<int32_t>({B}, in.lens));
  add(c.initial, "h0", HostTensor::Of<float>({D, B, H}, in.h0));
  if (c.op == OpKind::kLSTM) {
    add(c.initial, "c0", HostTensor::Of<float>({D, B, H}, in.c0));
    add(c.peep, "P", HostTensor::Of<float>({D, 3 * H}, in.p));
  }
  AttrMap attrs = {{"hidden_size", H}, {"direction", c.direction}};
  if (c.clip > 0) attrs["clip"] = c.clip;
  if (c.op == OpKind::kGRU) attrs["linear_before_reset"] = int64_t{c.lbr};
  attrs[kPresentInputsAttr] = PresentInputsMask(names);
  absl::StatusOr<OpAttrs> built = BuildOpAttrs(c.op, 14, attrs);
  ASSERT_TRUE(built.ok()) << built.status();

  DeviceRunner runner(Device::Cpu());
  const int outputs = c.op == OpKind::kLSTM ? 3 : 2;
  auto got = runner.Run(c.op, inputs, *built, outputs);
  ASSERT_TRUE(got.ok()) << got.status();
  const std::vector<std::vector<float>> want = Reference(c, in);
  const Shape shapes[] = {{kSeq, D, B, H}, {D, B, H}, {D, B, H}};
  for (int i = 0; i < outputs; ++i) {
    EXPECT_TRUE(AllClose((*got)[i], HostTensor::Of<float>(shapes[i], want[i]), 2e-5, 1e-4))
        << "output " << i;
  }
}

TEST(RecurrentReference, EveryCellDirectionAndStepPath) {
  int variant = 0;
  for (OpKind op : {OpKind::kLSTM, OpKind::kGRU, OpKind::kRNN}) {
    for (const char* direction : {"forward", "reverse", "bidirectional"}) {
      // 1 and 3 take RowGemm, 11 sgemm; 13 hits RowGemm's 8-wide block and its tail
      // (and 4 * 13 = 52 columns its 32-wide block), 72 its 64-wide block.
      for (int64_t batch : {int64_t{1}, int64_t{3}, cpu::kRowGemmMaxRows + 3}) {
        for (int64_t hidden : {13, 72}) {
          Case c{op, direction, batch, hidden};
          ++variant;
          c.lens = batch > 1 && variant % 2 == 0;
          c.initial = variant % 3 != 0;
          c.peep = op == OpKind::kLSTM && hidden == 72;
          c.lbr = op == OpKind::kGRU && variant % 2 == 1;
          c.clip = variant % 4 == 0 ? 0.7f : 0.0f;
          Check(c);
        }
      }
    }
  }
}

TEST(RowGemm, MatchesNaiveProductAtOddSizesAndStrides) {
  for (int64_t m : {1, 2, 5}) {
    for (int64_t n : {1, 7, 8, 33, 64, 100, 203}) {
      for (int64_t k : {1, 13, 64}) {
        const int64_t lda = k + 3, ldb = n + 5, ldc = n + 2;
        const std::vector<float> a = RandomFloats(m * lda, 21, -1, 1);
        const std::vector<float> b = RandomFloats(k * ldb, 22, -1, 1);
        std::vector<float> c(m * ldc, -7.0f);
        cpu::RowGemm(m, n, k, a.data(), lda, b.data(), ldb, c.data(), ldc);
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < ldc; ++j) {
            if (j >= n) {
              ASSERT_EQ(c[i * ldc + j], -7.0f) << "wrote past column " << n;
              continue;
            }
            double want = 0;
            for (int64_t p = 0; p < k; ++p) want += double{a[i * lda + p]} * b[p * ldb + j];
            ASSERT_NEAR(c[i * ldc + j], want, 1e-5 * (1 + std::abs(want)))
                << "m " << m << " n " << n << " k " << k << " at " << i << "," << j;
          }
        }
      }
    }
  }
}

// The columns right of the last 32-wide block go several rows at a time (4 rows of 24,
// 6 of 16, 8 of 8 columns), the rows left over one at a time, then single columns:
// attention's context product at head sizes 24 and 40. Row counts below, at and past
// each block height, widths hitting each narrow case with and without a 32-wide block
// and a single-column tail.
TEST(RowGemm, NarrowColumnBlocksMatchNaiveProduct) {
  for (int64_t m : {1, 3, 4, 6, 7, 8, 13, 32}) {
    for (int64_t n : {5, 8, 16, 24, 27, 40, 56, 61}) {
      for (int64_t k : {1, 24, 128}) {
        const int64_t lda = k + 1, ldb = n + 3, ldc = n + 4;
        const std::vector<float> a = RandomFloats(m * lda, 31, -1, 1);
        const std::vector<float> b = RandomFloats(k * ldb, 32, -1, 1);
        std::vector<float> c(m * ldc, -7.0f);
        cpu::RowGemm(m, n, k, a.data(), lda, b.data(), ldb, c.data(), ldc);
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < ldc; ++j) {
            if (j >= n) {
              ASSERT_EQ(c[i * ldc + j], -7.0f) << "wrote past column " << n;
              continue;
            }
            double want = 0;
            for (int64_t p = 0; p < k; ++p) want += double{a[i * lda + p]} * b[p * ldb + j];
            ASSERT_NEAR(c[i * ldc + j], want, 1e-5 * (1 + std::abs(want)))
                << "m " << m << " n " << n << " k " << k << " at " << i << "," << j;
          }
        }
      }
    }
  }
}

TEST(LaneMath, SigmoidAndTanhMatchLibm) {
  double worst_sig = 0, worst_tanh = 0;
  for (double x = -30.0; x <= 30.0; x += 0.001) {
    const float f = static_cast<float>(x);
    worst_sig =
        std::max(worst_sig, std::abs(cpu::LaneSigmoid(f) - 1.0 / (1.0 + std::exp(-double{f}))));
    worst_tanh = std::max(worst_tanh, std::abs(cpu::LaneTanh(f) - std::tanh(double{f})));
  }
  EXPECT_LT(worst_sig, 2e-7);
  EXPECT_LT(worst_tanh, 3e-7);
  // Tiny inputs keep their relative precision (the Taylor branch).
  for (float f : {1e-3f, -2e-5f, 0.2f, -0.2499f}) {
    EXPECT_NEAR(cpu::LaneTanh(f), std::tanh(double{f}), 1e-6 * std::abs(f)) << f;
  }
  constexpr float kInf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(cpu::LaneSigmoid(kInf), 1.0f);
  EXPECT_EQ(cpu::LaneSigmoid(-kInf), 0.0f);
  EXPECT_EQ(cpu::LaneTanh(kInf), 1.0f);
  EXPECT_EQ(cpu::LaneTanh(-kInf), -1.0f);
  EXPECT_EQ(cpu::LaneTanh(0.0f), 0.0f);
  EXPECT_TRUE(std::isnan(cpu::LaneSigmoid(std::nanf(""))));
  EXPECT_TRUE(std::isnan(cpu::LaneTanh(std::nanf(""))));
}

}  // namespace
}  // namespace ndserve::kernels::testing
