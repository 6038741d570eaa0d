// kernels/cpu/packed_gemm.h against a naive double-precision triple loop: the constant
// operand on either side, either operand transposed, sizes on and off every tile edge
// (6-row and 16-column tiles, 256-deep K blocks, the per-task slabs), C overwritten or
// accumulated onto, the epilogue called exactly once for every element of C, on the
// pool's threads and on one thread (inside a ParallelFor body, where a nested one runs
// inline); and PackedRowOutput's bias and activation in the micro-kernel. Up to four rows
// against a packed B take packed_gemv.h's path instead of the micro-kernel.
#include "kernels/cpu/packed_gemm.h"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cpu/packed_gemv.h"
#include "kernels/cpu/parallel.h"

namespace ndserve::kernels::cpu {
namespace {

std::vector<float> Random(int64_t n, int seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

struct Case {
  int64_t m, n, k;
  PackedMatrix::Side side;
  bool trans_packed, trans_other, accumulate;
};

std::string Name(const Case& c) {
  return absl::StrCat(c.m, "x", c.n, "x", c.k, c.side == PackedMatrix::Side::kA ? " packed A" : " packed B",
                      c.trans_packed ? " (T)" : "", c.trans_other ? " other T" : "",
                      c.accumulate ? " accumulate" : "");
}

// Runs one case and compares C, where the epilogue adds 1 to every element it is handed
// (so an element it skips or repeats is off by one).
void Check(const Case& c, bool one_thread) {
  const bool packed_a = c.side == PackedMatrix::Side::kA;
  // A is m x k and B is k x n, stored transposed where asked.
  const bool ta = packed_a ? c.trans_packed : c.trans_other;
  const bool tb = packed_a ? c.trans_other : c.trans_packed;
  const std::vector<float> a = Random(c.m * c.k, 1), b = Random(c.k * c.n, 2);
  const MatrixRef ar{a.data(), ta ? c.m : c.k, ta}, br{b.data(), tb ? c.k : c.n, tb};
  const int64_t ldc = c.n + 3;  // C a block of a wider matrix
  std::vector<float> y = Random(c.m * ldc, 3);
  const std::vector<float> y0 = y;
  std::vector<double> want(c.m * c.n);
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double s = c.accumulate ? y0[i * ldc + j] : 0.0;
      for (int64_t l = 0; l < c.k; ++l) s += static_cast<double>(ar.at(i, l)) * br.at(l, j);
      want[i * c.n + j] = s + 1.0;
    }
  }
  const PackedMatrix packed = packed_a ? PackedMatrix::Pack(c.side, ar, c.m, c.k)
                                       : PackedMatrix::Pack(c.side, br, c.k, c.n);
  std::vector<float> scratch(PackedGemmScratchFloats(packed, c.m, c.n, c.k));
  auto run = [&] {
    PackedGemm(packed, packed_a ? br : ar, c.m, c.n, c.k, y.data(), ldc, c.accumulate,
               scratch.data(), [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   for (int64_t j = c0; j < c1; ++j) y[r * ldc + j] += 1.0f;
                 }
               });
  };
  if (one_thread) {
    ParallelFor(2, 1, [&](int64_t b0, int64_t) {
      if (b0 == 0) run();
    });
  } else {
    run();
  }
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      const double w = want[i * c.n + j];
      ASSERT_NEAR(y[i * ldc + j], w, 1e-4 + 1e-4 * std::abs(w))
          << Name(c) << (one_thread ? " one thread" : "") << " at " << i << "," << j;
    }
    // The columns past n belong to someone else.
    for (int64_t j = c.n; j < ldc; ++j) {
      ASSERT_EQ(y[i * ldc + j], y0[i * ldc + j]) << Name(c) << " wrote past column n";
    }
  }
}

TEST(PackedGemmTest, MatchesNaiveOnEveryEdge) {
  const int64_t sizes[] = {1, 3, 7, 17, 64, 129};
  for (auto side : {PackedMatrix::Side::kA, PackedMatrix::Side::kB}) {
    for (int64_t m : sizes) {
      for (int64_t n : sizes) {
        for (int64_t k : {int64_t{1}, int64_t{7}, int64_t{64}, int64_t{300}}) {
          Check({m, n, k, side, false, false, false}, false);
        }
      }
    }
  }
}

TEST(PackedGemmTest, TransposesAndAccumulate) {
  for (auto side : {PackedMatrix::Side::kA, PackedMatrix::Side::kB}) {
    for (bool tp : {false, true}) {
      for (bool to : {false, true}) {
        for (bool acc : {false, true}) {
          Check({37, 45, 259, side, tp, to, acc}, false);
          Check({6, 16, 256, side, tp, to, acc}, false);
        }
      }
    }
  }
}

// Past one slab and one task block in each direction, and several K blocks: C split
// over many tasks, each packing its own slab in its own scratch slot.
TEST(PackedGemmTest, ManyTasksAndKBlocks) {
  for (auto side : {PackedMatrix::Side::kA, PackedMatrix::Side::kB}) {
    Check({131, 517, 600, side, false, false, false}, false);
    Check({250, 300, 513, side, false, true, true}, false);
  }
}

// Up to four rows against a packed B take the few-rows path (packed_gemv.h): every row
// count, A transposed or not, accumulated or not, K on and off its 4-deep chains and over
// several K blocks, N on and off the 16-wide panels and split over the threads.
TEST(PackedGemmTest, FewRowsAgainstAPackedB) {
  // The few-row path is the one taken: up to four rows against a packed B, not five, not a
  // packed A.
  const uint64_t before = PackedGemvCalls();
  Check({4, 40, 20, PackedMatrix::Side::kB, false, false, false}, false);
  EXPECT_EQ(PackedGemvCalls(), before + 1);
  Check({5, 40, 20, PackedMatrix::Side::kB, false, false, false}, false);
  Check({3, 40, 20, PackedMatrix::Side::kA, false, false, false}, false);
  EXPECT_EQ(PackedGemvCalls(), before + 1);
  for (int64_t m : {1, 2, 3, 4}) {
    for (int64_t k : {int64_t{1}, int64_t{3}, int64_t{6}, int64_t{513}}) {
      for (int64_t n : {int64_t{5}, int64_t{16}, int64_t{1000}}) {
        Check({m, n, k, PackedMatrix::Side::kB, false, false, false}, false);
      }
    }
    Check({m, 1000, 1280, PackedMatrix::Side::kB, true, true, true}, false);
    Check({m, 33, 300, PackedMatrix::Side::kB, false, true, false}, true);
  }
}

// A row-major A against a packed B is read in place (micro::RowsA); the same A stored
// transposed is packed into panels first. Both feed the kernel the same products in the
// same order, so C must be the same to the bit: full 12-row tiles, a short last tile (M =
// 29 and 250), several K blocks, the 8-wide last panel (N = 40).
TEST(PackedGemmTest, ARowsReadInPlaceGiveThePackedPanelsBits) {
  for (int64_t m : {int64_t{12}, int64_t{29}, int64_t{250}}) {
    const int64_t n = 40, k = 300;
    const std::vector<float> a = Random(m * k, 5), b = Random(k * n, 6);
    std::vector<float> at(k * m);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t l = 0; l < k; ++l) at[l * m + i] = a[i * k + l];
    }
    const PackedMatrix packed =
        PackedMatrix::Pack(PackedMatrix::Side::kB, MatrixRef{b.data(), n, false}, k, n);
    std::vector<float> scratch(PackedGemmScratchFloats(packed, m, n, k));
    std::vector<float> in_place(m * n), from_panels(m * n);
    const auto none = [](int64_t, int64_t, int64_t, int64_t) {};
    PackedGemm(packed, MatrixRef{a.data(), k, false}, m, n, k, in_place.data(), n, false,
               scratch.data(), none);
    PackedGemm(packed, MatrixRef{at.data(), m, true}, m, n, k, from_panels.data(), n, false,
               scratch.data(), none);
    for (int64_t i = 0; i < m * n; ++i) {
      ASSERT_EQ(in_place[i], from_panels[i]) << "M = " << m << " at " << i;
    }
  }
}

TEST(PackedGemmTest, OneThreadMatchesNaive) {
  for (auto side : {PackedMatrix::Side::kA, PackedMatrix::Side::kB}) {
    Check({131, 517, 300, side, false, false, false}, true);
    Check({7, 17, 129, side, true, false, true}, true);
  }
}

// PackedRowOutput: the bias of C's row and the activation applied in the micro-kernel
// before the store, on full and edge tiles, after one K block or several, onto C's old
// value when accumulating; the caller's epilogue still sees every element once, after.
void CheckRowOutput(int64_t m, int64_t n, int64_t k, bool with_bias, ConvEpilogue act,
                    bool accumulate) {
  const std::string name = absl::StrCat(m, "x", n, "x", k, with_bias ? " bias" : "",
                                        " act ", static_cast<int>(act.kind),
                                        accumulate ? " accumulate" : "");
  const std::vector<float> a = Random(m * k, 11), b = Random(k * n, 12);
  const std::vector<float> bias = Random(m, 13);
  const int64_t ldc = n + 5;
  std::vector<float> y = Random(m * ldc, 14);
  const std::vector<float> y0 = y;
  const PackedMatrix packed = PackedMatrix::Pack(PackedMatrix::Side::kA, {a.data(), k, false}, m, k);
  std::vector<float> scratch(PackedGemmScratchFloats(packed, m, n, k));
  PackedRowOutput out;
  out.bias = with_bias ? bias.data() : nullptr;
  out.act = act;
  std::vector<int> seen(m * n, 0);
  PackedGemm(packed, {b.data(), n, false}, m, n, k, y.data(), ldc, accumulate, scratch.data(),
             out, [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
               for (int64_t r = r0; r < r1; ++r) {
                 for (int64_t j = c0; j < c1; ++j) ++seen[r * n + j];
               }
             });
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = accumulate ? y0[i * ldc + j] : 0.0;
      for (int64_t l = 0; l < k; ++l) s += static_cast<double>(a[i * k + l]) * b[l * n + j];
      if (with_bias) s += bias[i];
      const double w = act(static_cast<float>(s));
      ASSERT_NEAR(y[i * ldc + j], w, 1e-4 + 1e-4 * std::abs(w)) << name << " at " << i << "," << j;
      ASSERT_EQ(seen[i * n + j], 1) << name << " epilogue at " << i << "," << j;
    }
    for (int64_t j = n; j < ldc; ++j) {
      ASSERT_EQ(y[i * ldc + j], y0[i * ldc + j]) << name << " wrote past column n";
    }
  }
}

TEST(PackedGemmTest, RowOutputInTheMicroKernel) {
  const ConvEpilogue acts[] = {{ConvActivation::kNone},
                               {ConvActivation::kRelu},
                               {ConvActivation::kClip, 0.0f, 0.3f},
                               {ConvActivation::kClip, -0.2f, 6.0f}};
  for (const ConvEpilogue& act : acts) {
    for (bool with_bias : {false, true}) {
      // A pointwise conv's shapes (K = Cin, N = H * W), rows and columns off the tiles.
      for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{49}, int64_t{196}, int64_t{3137}}) {
        CheckRowOutput(13, n, 19, with_bias, act, false);
      }
      CheckRowOutput(6, 16, 16, with_bias, act, false);
      CheckRowOutput(37, 45, 600, with_bias, act, false);  // three K blocks
      CheckRowOutput(37, 45, 259, with_bias, act, true);
    }
  }
}

// The 12-row tiles of the AVX-512 kernel (PackedGemmUsesAvx512) where tasks end part way
// into a tile's second panel (23 = 12 + 11 rows in one task; 110 in four tasks, the last
// 12 + 8), on full 16-column panels and on N = 49's last one, which the 12 x 8 tile runs;
// K over one block, C overwritten and accumulated, with bias and Clip. Elsewhere these
// run 6-row tiles and check the same.
TEST(PackedGemmTest, TwelveRowTilesAndTheirEdges) {
  const ConvEpilogue clip{ConvActivation::kClip, -0.2f, 6.0f};
  for (bool accumulate : {false, true}) {
    CheckRowOutput(23, 3137, 19, true, clip, accumulate);
    CheckRowOutput(19, 3137, 300, true, {ConvActivation::kRelu}, accumulate);
    CheckRowOutput(110, 49, 300, true, clip, accumulate);
    CheckRowOutput(130, 41, 40, false, {ConvActivation::kNone}, accumulate);
  }
}

// NaN passes through the in-kernel Relu and Clip as through their scalar functors.
TEST(PackedGemmTest, NaNPassesThroughTheFinish) {
  const int64_t m = 24, n = 49, k = 8;
  std::vector<float> a = Random(m * k, 21), b = Random(k * n, 22), y(m * n);
  a[7 * k + 3] = std::nanf("");  // row 7, in the second panel of the first 12-row tile
  a[20 * k] = std::nanf("");
  const PackedMatrix packed = PackedMatrix::Pack(PackedMatrix::Side::kA, {a.data(), k, false}, m, k);
  std::vector<float> scratch(PackedGemmScratchFloats(packed, m, n, k));
  for (const ConvEpilogue act : {ConvEpilogue{ConvActivation::kRelu},
                                 ConvEpilogue{ConvActivation::kClip, 0.0f, 6.0f}}) {
    PackedRowOutput out;
    out.act = act;
    PackedGemm(packed, {b.data(), n, false}, m, n, k, y.data(), n, false, scratch.data(), out,
               [](int64_t, int64_t, int64_t, int64_t) {});
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        EXPECT_EQ(std::isnan(y[i * n + j]), i == 7 || i == 20) << i << "," << j;
      }
    }
  }
}

// Products from several threads at once: each call's scratch slots are its own.
TEST(PackedGemmTest, ConcurrentCallers) {
  std::vector<std::thread> callers;
  for (int t = 0; t < 3; ++t) {
    callers.emplace_back([t] {
      Check({64 + t, 200, 300, t % 2 ? PackedMatrix::Side::kA : PackedMatrix::Side::kB, false,
             false, false},
            false);
    });
  }
  for (std::thread& t : callers) t.join();
}

}  // namespace
}  // namespace ndserve::kernels::cpu
