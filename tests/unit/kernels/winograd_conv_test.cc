// The Winograd conv (kernels/cpu/winograd_conv.h): F(4x4, 3x3) for one-group 3x3 stride-1
// convs against a naive double-precision reference, through the Conv kernel and called
// alone: heights and widths that are no multiple of the 4-wide tile (so edge tiles are
// cut), tile counts that are no multiple of 16 (a partial last B panel), channel counts
// that are no multiple of the 6-row panel, c past one K block, pads 0 to 3 and asymmetric,
// batch 1, 2, 3 and 4, more tile panels than one chunk holds, every fused activation,
// with and without bias.
#include "kernels/cpu/winograd_conv.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "gtest/gtest.h"
#include "kernels/conv_geometry.h"
#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/packed_weights.h"
#include "kernels/node_attrs.h"
#include "tests/unit/kernels/kernel_test_util.h"
#include "tests/unit/kernels/naive_conv.h"

namespace ndserve::kernels::testing {
namespace {

// Winograd rounds differently from a dot product: the input and output transforms
// multiply by up to 5 (B^T) and 8 (A^T) and sum six terms each way, so an output's
// rounding error scales with the largest partial sums, not with the output itself. An
// absolute tolerance tied to the output's scale (1e-4 x max|ref|, the PyTorch-export
// tests' atol) bounds it; relative 1e-4 keeps large outputs as tight as the direct conv.
constexpr double kAtolScale = 1e-4, kRtol = 1e-4;

double MaxAbs(const HostTensor& t) {
  double m = 0;
  for (float v : t.Values<float>()) m = std::max(m, std::abs(static_cast<double>(v)));
  return m;
}

struct Case {
  std::string name;
  int64_t n, c, m, h, w;
  std::vector<int64_t> pads;  // top, left, bottom, right
  ConvEpilogue act;
  bool bias;
};

std::vector<Case> Cases() {
  const ConvEpilogue none, relu{ConvActivation::kRelu}, clip{ConvActivation::kClip, -0.5f, 1.5f},
      hswish{ConvActivation::kHardSwish}, sigmoid{ConvActivation::kSigmoid};
  return {
      {"odd image, pads 1, relu", 1, 17, 19, 21, 23, {1, 1, 1, 1}, relu, true},
      {"batch 3, no bias", 3, 16, 22, 9, 13, {1, 1, 1, 1}, none, false},
      {"c past one K block", 1, 300, 16, 14, 14, {1, 1, 1, 1}, relu, true},
      {"asymmetric pads", 2, 20, 17, 11, 10, {0, 1, 2, 0}, clip, true},
      {"pads 2 and 3", 1, 16, 18, 10, 15, {2, 3, 3, 2}, relu, true},
      {"no padding", 1, 18, 25, 19, 26, {0, 0, 0, 0}, hswish, true},
      {"batch 4 of 7x7 (resnet's last stage)", 4, 40, 33, 7, 7, {1, 1, 1, 1}, sigmoid, true},
      {"wide rows", 1, 16, 64, 9, 61, {1, 1, 1, 1}, relu, false},
      {"several chunks of panels", 2, 64, 70, 30, 29, {1, 1, 1, 1}, relu, true},
  };
}

// A case's random X, W and bias (seeds from `seed`), its attrs and geometry.
struct Inputs {
  HostTensor x, w, b;
  ConvAttrs a;
  ConvGeometry g;
};

Inputs MakeInputs(const Case& k, uint32_t seed) {
  Inputs in{RandomTensor({k.n, k.c, k.h, k.w}, seed),
            RandomTensor({k.m, k.c, 3, 3}, seed + 1, -0.2f, 0.2f),
            RandomTensor({k.m}, seed + 2),
            {},
            {}};
  in.a.pads = k.pads;
  in.a.activation = k.act;
  const Shape xs = in.x.shape, ws = in.w.shape;
  const auto g =
      MakeConvGeometry("Conv", in.a, ShapeSpan(xs).subspan(2), ShapeSpan(ws).subspan(2), false);
  EXPECT_TRUE(g.ok()) << k.name << ": " << g.status();
  if (g.ok()) in.g = *g;
  return in;
}

TEST(WinogradConvTest, ConvTakesItAndMatchesNaive) {
  uint32_t seed = 4100;
  for (const Case& k : Cases()) {
    const Inputs in = MakeInputs(k, seed += 3);
    const HostTensor &x = in.x, &w = in.w, &b = in.b;
    const ConvAttrs& a = in.a;
    const ConvGeometry* g = &in.g;
    TensorView wv{const_cast<uint8_t*>(w.bytes.data()), w.dtype, w.shape, Device::Cpu()};
    const auto packed = cpu::PackNodeWeight(OpKind::kConv, a, wv);
    ASSERT_NE(packed, nullptr) << k.name;
    ASSERT_NE(packed->winograd(), nullptr) << k.name;
    ASSERT_TRUE(cpu::WinogradConvSuits(*g, *packed->winograd(), k.n, k.c, k.m)) << k.name;
    DeviceRunner runner(Device::Cpu());
    runner.set_packed_weight(packed.get());
    std::vector<HostTensor> args = {x, w};
    if (k.bias) args.push_back(b);
    const auto got = runner.Run(OpKind::kConv, args, a, 1);
    ASSERT_TRUE(got.ok()) << k.name << ": " << got.status();
    const HostTensor want = NaiveConv2d(x, w, k.bias ? b.Values<float>() : std::vector<float>{},
                                        {1, 1}, {1, 1}, k.pads, k.act);
    ASSERT_EQ((*got)[0].shape, want.shape) << k.name;
    EXPECT_TRUE(AllClose((*got)[0], want, kAtolScale * MaxAbs(want), kRtol)) << k.name;
  }
}

// WinogradConv called alone, on scratch full of NaNs, also at shapes Conv sends to the
// direct conv (few channels, fewer tiles than a panel): every scratch float feeding a kept
// output is one it wrote, and the kernel itself has no lower bound on c, m or tiles.
TEST(WinogradConvTest, ReadsNoScratchItDidNotWrite) {
  uint32_t seed = 5100;
  std::vector<Case> cases = Cases();
  cases.push_back({"few channels", 3, 5, 7, 6, 9, {1, 1, 1, 1}, {}, true});
  cases.push_back({"one tile", 1, 3, 2, 3, 3, {1, 1, 1, 1}, {}, true});
  cases.push_back({"4 tiles", 1, 9, 13, 7, 7, {1, 1, 1, 1}, {}, false});
  for (const Case& k : cases) {
    const Inputs in = MakeInputs(k, seed += 3);
    const HostTensor &x = in.x, &w = in.w, &b = in.b;
    const ConvGeometry* g = &in.g;
    const std::vector<float> wf = w.Values<float>(), xf = x.Values<float>(), bf = b.Values<float>();
    const auto u = cpu::PackWinogradWeight(wf.data(), k.m, k.c);
    std::vector<float> scratch(cpu::WinogradConvScratchFloats(*g, k.n, k.c, k.m),
                               std::numeric_limits<float>::quiet_NaN());
    std::vector<float> y(k.n * k.m * g->out_plane(), std::numeric_limits<float>::quiet_NaN());
    cpu::WinogradConv(*g, *u, k.n, k.c, k.m, xf.data(), k.bias ? bf.data() : nullptr, k.act,
                      scratch.data(), y.data());
    const HostTensor want =
        NaiveConv2d(x, w, k.bias ? bf : std::vector<float>{}, {1, 1}, {1, 1}, k.pads, k.act);
    EXPECT_TRUE(
        AllClose(HostTensor::Of<float>(want.shape, y), want, kAtolScale * MaxAbs(want), kRtol))
        << k.name;
  }
}

// The GEMMs' 12 x 16 AVX-512 tiles sum in the 6 x 16 kernel's order: both give the same
// bits, whichever the CPU would pick.
TEST(WinogradConvTest, AvxWidthsGiveTheSameBits) {
  if (!cpu::PackedGemmUsesAvx512()) GTEST_SKIP() << "no AVX-512 on this CPU";
  uint32_t seed = 6100;
  for (const Case& k : Cases()) {
    const Inputs in = MakeInputs(k, seed += 3);
    const std::vector<float> wf = in.w.Values<float>(), xf = in.x.Values<float>(),
                             bf = in.b.Values<float>();
    const auto u = cpu::PackWinogradWeight(wf.data(), k.m, k.c);
    std::vector<float> got[2];
    for (int wide : {0, 1}) {
      std::vector<float> scratch(cpu::WinogradConvScratchFloats(in.g, k.n, k.c, k.m));
      got[wide].assign(k.n * k.m * in.g.out_plane(), 0.0f);
      cpu::SetWinogradAvx512ForTesting(wide);
      cpu::WinogradConv(in.g, *u, k.n, k.c, k.m, xf.data(), k.bias ? bf.data() : nullptr, k.act,
                        scratch.data(), got[wide].data());
    }
    cpu::SetWinogradAvx512ForTesting(-1);
    ASSERT_EQ(std::memcmp(got[0].data(), got[1].data(), got[0].size() * sizeof(float)), 0)
        << k.name;
  }
}

// Only one-group 3x3 stride-1 undilated convs with enough channels get the second
// packing, and the model counts its floats; calls with too few tiles stay direct.
TEST(WinogradConvTest, PackedOnlyWhereItSuits) {
  ConvAttrs a;
  EXPECT_TRUE(cpu::WinogradWeightSuits(a, 16, 16, 3, 3));
  EXPECT_FALSE(cpu::WinogradWeightSuits(a, 16, 8, 3, 3));
  EXPECT_FALSE(cpu::WinogradWeightSuits(a, 8, 16, 3, 3));
  EXPECT_FALSE(cpu::WinogradWeightSuits(a, 16, 16, 5, 5));
  ConvAttrs strided;
  strided.strides = {2, 2};
  EXPECT_FALSE(cpu::WinogradWeightSuits(strided, 16, 16, 3, 3));
  ConvAttrs dilated;
  dilated.dilations = {1, 2};
  EXPECT_FALSE(cpu::WinogradWeightSuits(dilated, 16, 16, 3, 3));
  ConvAttrs grouped;
  grouped.group = 2;
  EXPECT_FALSE(cpu::WinogradWeightSuits(grouped, 16, 16, 3, 3));

  const HostTensor w = RandomTensor({16, 16, 3, 3}, 3);
  TensorView wv{const_cast<uint8_t*>(w.bytes.data()), w.dtype, w.shape, Device::Cpu()};
  const auto packed = cpu::PackNodeWeight(OpKind::kConv, a, wv);
  ASSERT_NE(packed, nullptr);
  ASSERT_NE(packed->winograd(), nullptr);
  EXPECT_EQ(packed->winograd()->rows(), 36 * 18);
  EXPECT_EQ(packed->winograd()->cols(), 16);
  // A: 16 rows in 3 panels of 6 x 144; U: 36 * 18 rows x 16.
  EXPECT_EQ(packed->bytes(), (18 * 144 + 36 * 18 * 16) * 4);
  EXPECT_EQ(cpu::PackNodeWeight(OpKind::kConv, strided, wv)->winograd(), nullptr);

  ConvAttrs pad1;
  pad1.pads = {1, 1, 1, 1};
  const Shape seven = {7, 7}, k3 = {3, 3};
  const auto g = MakeConvGeometry("Conv", pad1, seven, k3, false);
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(cpu::WinogradConvSuits(*g, *packed->winograd(), 1, 16, 16));  // 4 tiles
  EXPECT_TRUE(cpu::WinogradConvSuits(*g, *packed->winograd(), 4, 16, 16));   // 16
  EXPECT_FALSE(cpu::WinogradConvSuits(*g, *packed->winograd(), 4, 16, 19));  // not its m
}

}  // namespace
}  // namespace ndserve::kernels::testing
