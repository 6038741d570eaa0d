// The CPU MaxPool's 3x3 path at stride 1 and 2 (kernels/cpu/max_pool3x3.cc: column maxima
// per input row, then three rows per output row) against a naive walk of each window:
// planes 1x1, 2x3, 7x7, 13x17 and 112x112, no, full and asymmetric padding, ceil_mode's
// overhang, batch 1 and 3, and NaN, which must win its windows. Also which geometries
// take the path, read off the scratch it holds (the other paths hold none).
#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "kernels/node_attrs.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ndserve::kernels::testing {
namespace {

struct Case {
  int64_t n, c, h, w, kh, kw;
  std::vector<int64_t> strides, dilations, pads;  // pads: top, left, bottom, right
  bool ceil_mode;
};

// Runs MaxPool on random data with two NaNs; expects the naive windows' max exactly and
// returns the scratch the run held at its peak.
std::size_t ExpectMatchesNaive(const Case& k, uint32_t seed, const std::string& name) {
  std::vector<float> xv = RandomTensor({k.n, k.c, k.h, k.w}, seed).Values<float>();
  xv[(seed * 7) % xv.size()] = std::nanf("");
  xv[(seed * 13 + 5) % xv.size()] = std::nanf("");
  const HostTensor x = HostTensor::Of<float>({k.n, k.c, k.h, k.w}, xv);
  PoolAttrs a;
  a.kernel_shape = {k.kh, k.kw};
  a.strides = k.strides;
  a.dilations = k.dilations;
  a.pads = k.pads;
  a.ceil_mode = k.ceil_mode;
  DeviceRunner runner(Device::Cpu());
  const auto got = runner.Run(OpKind::kMaxPool, {x}, a, 1);
  EXPECT_TRUE(got.ok()) << name << ": " << got.status();
  if (!got.ok()) return 0;
  const Shape& ys = (*got)[0].shape;
  EXPECT_EQ(ys.size(), 4u) << name;
  if (ys.size() != 4) return 0;
  const int64_t oh = ys[2], ow = ys[3];
  const std::vector<float> gv = (*got)[0].Values<float>();
  int bad = 0;
  for (int64_t p = 0; p < k.n * k.c; ++p) {
    for (int64_t r = 0; r < oh; ++r) {
      for (int64_t s = 0; s < ow; ++s) {
        float best = -std::numeric_limits<float>::infinity();
        for (int64_t i = 0; i < k.kh; ++i) {
          for (int64_t j = 0; j < k.kw; ++j) {
            const int64_t ih = r * k.strides[0] - k.pads[0] + i * k.dilations[0];
            const int64_t iw = s * k.strides[1] - k.pads[1] + j * k.dilations[1];
            if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w) continue;
            const float v = xv[(p * k.h + ih) * k.w + iw];
            best = std::isnan(v) || std::isnan(best) ? std::nanf("") : std::max(best, v);
          }
        }
        const float g = gv[(p * oh + r) * ow + s];
        const bool same = std::isnan(best) ? std::isnan(g) : g == best;
        if (!same && ++bad <= 3) {
          ADD_FAILURE() << name << ": plane " << p << " (" << r << ", " << s << "): got " << g
                        << ", want " << best;
        }
      }
    }
  }
  return runner.scratch().peak_bytes();
}

TEST(MaxPool3x3Test, MatchesNaiveOverShapesPadsAndBatches) {
  const std::vector<std::pair<int64_t, int64_t>> planes = {
      {1, 1}, {2, 3}, {7, 7}, {13, 17}, {112, 112}};
  const std::vector<std::vector<int64_t>> pads = {
      {0, 0, 0, 0}, {1, 1, 1, 1}, {1, 0, 0, 1}, {0, 1, 2, 1}};
  int idx = 0, ran = 0;
  for (const auto& [h, w] : planes) {
    for (int64_t stride : {1, 2}) {
      for (const std::vector<int64_t>& p : pads) {
        for (bool ceil_mode : {false, true}) {
          ++idx;
          // The padded plane must hold the window (else the MaxPool is invalid).
          if (h + p[0] + p[2] < 3 || w + p[1] + p[3] < 3) continue;
          const Case k{idx % 4 < 2 ? 1 : 3, 2, h, w, 3, 3, {stride, stride}, {1, 1}, p, ceil_mode};
          const std::string name = absl::StrCat("plane ", h, "x", w, " stride ", stride,
                                                " pads ", absl::StrJoin(p, ","), " batch ", k.n,
                                                ceil_mode ? " ceil" : "");
          EXPECT_GT(ExpectMatchesNaive(k, 300 + idx, name), 0u) << name << ": not the 3x3 path";
          ++ran;
        }
      }
    }
  }
  EXPECT_GE(ran, 60);
}

// Other windows keep the per-row taps of MaxPoolRows (no scratch) and stay right.
TEST(MaxPool3x3Test, OtherWindowsKeepTheirPath) {
  const std::vector<std::pair<std::string, Case>> cases = {
      {"2x2 s2", {1, 3, 12, 14, 2, 2, {2, 2}, {1, 1}, {0, 0, 0, 0}, false}},
      {"3x3 dilated", {1, 3, 12, 14, 3, 3, {1, 1}, {2, 2}, {1, 1, 1, 1}, false}},
      {"3x3 strides (1, 2)", {1, 3, 12, 14, 3, 3, {1, 2}, {1, 1}, {1, 1, 1, 1}, false}},
      {"3x3 stride 3", {1, 3, 12, 14, 3, 3, {3, 3}, {1, 1}, {1, 1, 1, 1}, false}},
  };
  uint32_t seed = 700;
  for (const auto& [name, k] : cases) {
    EXPECT_EQ(ExpectMatchesNaive(k, ++seed, name), 0u) << name;
  }
}

}  // namespace
}  // namespace ndserve::kernels::testing
