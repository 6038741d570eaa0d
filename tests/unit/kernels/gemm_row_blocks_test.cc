// Gemm products between OpenBLAS's single-thread bound and 64 times it, which the CPU
// kernel cuts into row blocks run on ParallelFor's threads (kernels/cpu/gemm.cc), against
// a naive double-precision reference: every transpose, a bias or a full C, a fused
// activation, and a row count that leaves a short last block.
#include <optional>

#include "gtest/gtest.h"
#include "kernels/node_attrs.h"
#include "tests/unit/kernels/kernel_test_util.h"
#include "tests/unit/kernels/naive_gemm.h"

namespace ndserve::kernels::testing {
namespace {

constexpr double kAtol = 1e-5, kRtol = 1e-4;  // sums of K products, order differs

TEST(GemmRowBlocksTest, BlockedProductsMatchNaive) {
  // 301 x 70 x 50 = 1.05M multiply-adds: blocks of 262144 / 3500 = 74 rows, the last 5.
  const int64_t m = 301, n = 70, k = 50;
  int seed = 40;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (bool c_full : {false, true}) {
        for (bool relu : {false, true}) {
          const HostTensor a = RandomTensor(ta ? Shape{k, m} : Shape{m, k}, ++seed);
          const HostTensor b = RandomTensor(tb ? Shape{n, k} : Shape{k, n}, ++seed);
          const HostTensor c = RandomTensor(c_full ? Shape{m, n} : Shape{n}, ++seed);
          // beta 1 with a column C is nn.Linear's bias, added in the epilogue pass.
          GemmAttrs attrs{0.5f, 1.0f, ta, tb};
          if (relu) attrs.epilogue.activation = GemmActivation::kRelu;
          DeviceRunner runner(Device::Cpu());
          const auto got = runner.Run(OpKind::kGemm, {a, b, c}, attrs, 1);
          ASSERT_TRUE(got.ok()) << got.status();
          const std::vector<float> cv = c.Values<float>();
          const HostTensor want =
              HostTensor::Of<float>({m, n}, NaiveGemm(a.Values<float>(), b.Values<float>(), &cv,
                                                      c_full ? Shape{m, n} : Shape{n}, m, n, k, ta,
                                                      tb, 0.5f, 1.0f, attrs.epilogue));
          EXPECT_TRUE(AllClose((*got)[0], want, kAtol, kRtol))
              << "transA " << ta << " transB " << tb << " full C " << c_full << " relu " << relu;
        }
      }
    }
  }
}

}  // namespace
}  // namespace ndserve::kernels::testing
