// The CPU MaxPool without its indices output (kernels/cpu/pool.cc: MaxPoolRows, the
// window a tap at a time over whole output rows) against a naive walk of each window:
// strides 1 and 2, padding on either side, dilation, ceil_mode's overhang, batch 2, and
// NaN, which must win its windows as it does with the indices output.
// Its 3x3 cases at strides 1 and 2 reach max_pool3x3.cc instead (max_pool3x3_test.cc).
#include <cmath>
#include <limits>
#include <string>

#include "gtest/gtest.h"
#include "kernels/node_attrs.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ndserve::kernels::testing {
namespace {

struct Case {
  std::string name;
  int64_t h, w, kh, kw;
  std::vector<int64_t> strides, dilations, pads;  // pads: top, left, bottom, right
  bool ceil_mode;
};

TEST(MaxPoolRowsTest, MatchesNaiveWindows) {
  const std::vector<Case> cases = {
      {"3x3 s2 p1 (resnet stem)", 15, 21, 3, 3, {2, 2}, {1, 1}, {1, 1, 1, 1}, false},
      {"2x2 s2", 8, 10, 2, 2, {2, 2}, {1, 1}, {0, 0, 0, 0}, false},
      {"3x3 s1 p1", 7, 19, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, false},
      {"3x2 s(2,3) dilated asym ceil", 11, 17, 3, 2, {2, 3}, {2, 2}, {0, 1, 1, 0}, true},
  };
  uint32_t seed = 80;
  for (const Case& k : cases) {
    const int64_t n = 2, c = 3;
    std::vector<float> xv = RandomTensor({n, c, k.h, k.w}, ++seed).Values<float>();
    xv[5] = std::nanf("");
    xv[k.h * k.w + 2 * k.w + 3] = std::nanf("");
    const HostTensor x = HostTensor::Of<float>({n, c, k.h, k.w}, xv);
    PoolAttrs a;
    a.kernel_shape = {k.kh, k.kw};
    a.strides = k.strides;
    a.dilations = k.dilations;
    a.pads = k.pads;
    a.ceil_mode = k.ceil_mode;
    DeviceRunner runner(Device::Cpu());
    const auto got = runner.Run(OpKind::kMaxPool, {x}, a, 1);
    ASSERT_TRUE(got.ok()) << k.name << ": " << got.status();
    const Shape& ys = (*got)[0].shape;
    ASSERT_EQ(ys.size(), 4u) << k.name;
    const int64_t oh = ys[2], ow = ys[3];
    std::vector<float> want(n * c * oh * ow);
    for (int64_t p = 0; p < n * c; ++p) {
      for (int64_t r = 0; r < oh; ++r) {
        for (int64_t s = 0; s < ow; ++s) {
          float best = -std::numeric_limits<float>::infinity();
          for (int64_t i = 0; i < k.kh; ++i) {
            for (int64_t j = 0; j < k.kw; ++j) {
              const int64_t ih = r * k.strides[0] - k.pads[0] + i * k.dilations[0];
              const int64_t iw = s * k.strides[1] - k.pads[1] + j * k.dilations[1];
              if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w) continue;
              const float v = xv[(p * k.h + ih) * k.w + iw];
              if (std::isnan(v) || std::isnan(best)) {
                best = std::nanf("");
              } else {
                best = std::max(best, v);
              }
            }
          }
          want[(p * oh + r) * ow + s] = best;
        }
      }
    }
    const std::vector<float> gv = (*got)[0].Values<float>();
    ASSERT_EQ(gv.size(), want.size()) << k.name;
    for (std::size_t i = 0; i < want.size(); ++i) {
      if (std::isnan(want[i])) {
        EXPECT_TRUE(std::isnan(gv[i])) << k.name << " at " << i;
      } else {
        EXPECT_EQ(gv[i], want[i]) << k.name << " at " << i;
      }
    }
  }
}

}  // namespace
}  // namespace ndserve::kernels::testing
