// The CPU Gemm and MatMul with B packed at load (kernels/cpu/packed_weights.h,
// KernelContext::packed_weight): every transpose, a column bias or a full C, fused
// activations, a MatMul whose batch folds into M with a fused bias, against a naive
// double-precision reference (naive_gemm.h); the kernel reads the packed operand rather than its B input,
// and a product of few rows keeps the unpacked path.
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/packed_weights.h"
#include "kernels/node_attrs.h"
#include "tests/unit/kernels/kernel_test_util.h"
#include "tests/unit/kernels/naive_gemm.h"

namespace ndserve::kernels::testing {
namespace {

// Float sums of up to 300 products in another order than the double reference.
constexpr double kAtol = 1e-4, kRtol = 1e-4;

std::unique_ptr<cpu::PackedMatrix> Pack(OpKind op, const OpAttrs& attrs, const HostTensor& b) {
  TensorView view{const_cast<uint8_t*>(b.bytes.data()), b.dtype, b.shape, Device::Cpu()};
  return cpu::PackNodeWeight(op, attrs, view);
}

TEST(GemmPackedWeightTest, GemmMatchesNaive) {
  const GemmEpilogue relu{GemmActivation::kRelu};
  const GemmEpilogue gelu{GemmActivation::kGelu, 0.5f, 1.41421356f, 1.0f};
  int seed = 500;
  for (int64_t m : {32, 37, 100}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        for (bool c_full : {false, true}) {
          const int64_t n = 45, k = 300;
          const HostTensor a = RandomTensor(ta ? Shape{k, m} : Shape{m, k}, ++seed);
          const HostTensor b = RandomTensor(tb ? Shape{n, k} : Shape{k, n}, ++seed);
          const HostTensor c = RandomTensor(c_full ? Shape{m, n} : Shape{n}, ++seed);
          GemmAttrs attrs{1.0f, 1.0f, ta, tb};
          attrs.epilogue = c_full ? relu : gelu;
          const auto packed = Pack(OpKind::kGemm, attrs, b);
          ASSERT_NE(packed, nullptr);
          DeviceRunner runner(Device::Cpu());
          runner.set_packed_weight(packed.get());
          const auto got = runner.Run(OpKind::kGemm, {a, b, c}, attrs, 1);
          ASSERT_TRUE(got.ok()) << got.status();
          const std::vector<float> cv = c.Values<float>();
          const HostTensor want = HostTensor::Of<float>(
              {m, n}, NaiveGemm(a.Values<float>(), b.Values<float>(), &cv,
                                c_full ? Shape{m, n} : Shape{n}, m, n, k, ta, tb, 1.0f, 1.0f,
                                attrs.epilogue));
          EXPECT_TRUE(AllClose((*got)[0], want, kAtol, kRtol))
              << m << " rows, transA " << ta << " transB " << tb << " full C " << c_full;
        }
      }
    }
  }
}

TEST(GemmPackedWeightTest, FusedMatMulFoldsBatchIntoRows) {
  const int64_t batch = 3, m = 20, n = 70, k = 65;
  const HostTensor a = RandomTensor({batch, m, k}, 1);
  const HostTensor b = RandomTensor({k, n}, 2);
  const HostTensor bias = RandomTensor({n}, 3);
  GemmAttrs attrs;
  attrs.matmul_bias = true;
  attrs.epilogue = {GemmActivation::kClip, -0.5f, 0.5f};
  const auto packed = Pack(OpKind::kMatMul, attrs, b);
  ASSERT_NE(packed, nullptr);
  DeviceRunner runner(Device::Cpu());
  runner.set_packed_weight(packed.get());
  const auto got = runner.Run(OpKind::kMatMul, {a, b, bias}, attrs, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  const std::vector<float> bv = bias.Values<float>();
  const HostTensor want = HostTensor::Of<float>(
      {batch, m, n}, NaiveGemm(a.Values<float>(), b.Values<float>(), &bv, {n}, batch * m, n, k,
                               false, false, 1.0f, 1.0f, attrs.epilogue));
  EXPECT_TRUE(AllClose((*got)[0], want, kAtol, kRtol));
}

// Packed from 2 B, called with B: a product of 40 rows comes out as A x 2B (the packed
// path ran); one of 8 rows as A x B (too few rows for a B this small: the packed weight
// is not used); one row by a B of 1 MB as A x 2B again (a classifier at batch 1).
TEST(GemmPackedWeightTest, ReadsThePackedOperandFromEnoughRows) {
  const int64_t n = 24, k = 30;
  const HostTensor b = RandomTensor({k, n}, 7);
  std::vector<float> b2 = b.Values<float>();
  for (float& v : b2) v *= 2.0f;
  const HostTensor b2t = HostTensor::Of<float>({k, n}, b2);
  const auto packed = Pack(OpKind::kMatMul, NoAttrs{}, b2t);
  for (int64_t m : {40, 8}) {
    const HostTensor a = RandomTensor({m, k}, 8);
    DeviceRunner runner(Device::Cpu());
    runner.set_packed_weight(packed.get());
    const auto got = runner.Run(OpKind::kMatMul, {a, b}, NoAttrs{}, 1);
    ASSERT_TRUE(got.ok()) << got.status();
    const HostTensor want = HostTensor::Of<float>(
        {m, n}, NaiveGemm(a.Values<float>(), m >= 32 ? b2 : b.Values<float>(), nullptr, {}, m, n,
                          k, false, false));
    EXPECT_TRUE(AllClose((*got)[0], want, kAtol, kRtol)) << m << " rows";
  }
  const HostTensor big = RandomTensor({512, 512}, 9);
  std::vector<float> big2 = big.Values<float>();
  for (float& v : big2) v *= 2.0f;
  const auto big_packed = Pack(OpKind::kMatMul, NoAttrs{}, HostTensor::Of<float>({512, 512}, big2));
  const HostTensor a = RandomTensor({1, 512}, 10);
  DeviceRunner runner(Device::Cpu());
  runner.set_packed_weight(big_packed.get());
  const auto got = runner.Run(OpKind::kMatMul, {a, big}, NoAttrs{}, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  const HostTensor want = HostTensor::Of<float>(
      {1, 512}, NaiveGemm(a.Values<float>(), big2, nullptr, {}, 1, 512, 512, false, false));
  EXPECT_TRUE(AllClose((*got)[0], want, 1e-3, kRtol)) << "1 row by 512 x 512";
}

// A product of fewer than four columns keeps the unpacked path however many rows it has
// (a 16-wide tile would be mostly zeros): recsys's scoring head, [256 x 32] x [1 x 32]^T.
// The packed weight holds 2B, so the result says which path ran.
TEST(GemmPackedWeightTest, NarrowProductsKeepTheUnpackedPath) {
  const int64_t m = 256, k = 32;
  for (int64_t n : {1, 3, 4}) {
    const HostTensor b = RandomTensor({n, k}, 11);
    std::vector<float> b2 = b.Values<float>();
    for (float& v : b2) v *= 2.0f;
    const GemmAttrs attrs{1.0f, 1.0f, false, true};
    const auto packed = Pack(OpKind::kGemm, attrs, HostTensor::Of<float>({n, k}, b2));
    ASSERT_NE(packed, nullptr);
    const HostTensor a = RandomTensor({m, k}, 12);
    DeviceRunner runner(Device::Cpu());
    runner.set_packed_weight(packed.get());
    const auto got = runner.Run(OpKind::kGemm, {a, b}, attrs, 1);
    ASSERT_TRUE(got.ok()) << got.status();
    const HostTensor want = HostTensor::Of<float>(
        {m, n}, NaiveGemm(a.Values<float>(), n >= 4 ? b2 : b.Values<float>(), nullptr, {}, m, n,
                          k, false, true));
    EXPECT_TRUE(AllClose((*got)[0], want, kAtol, kRtol)) << n << " columns";
  }
}

}  // namespace
}  // namespace ndserve::kernels::testing
