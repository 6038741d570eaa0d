// The training math table (kernels/train_kernels.h, docs/design.md §10.2). On the CPU
// every backward is checked against finite differences of its forward; on each CUDA
// device present every entry is checked against the CPU entry on random inputs (1e-4),
// and skipped without one.
#include "kernels/train_kernels.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ndserve::kernels {
namespace {

using testing::DeviceRunner;
using testing::HostTensor;
using testing::RandomFloats;

const TrainKernels& Cpu() { return cpu::TrainKernelTable(); }

std::vector<float> Random(std::int64_t n, std::uint32_t seed) { return RandomFloats(n, seed); }

// d/dx_i of f at x by central differences, in double around float inputs.
std::vector<double> NumericGrad(const std::function<double(const std::vector<float>&)>& f,
                                std::vector<float> x) {
  std::vector<double> g(x.size());
  const float h = 1e-2f;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float keep = x[i];
    x[i] = keep + h;
    const double up = f(x);
    x[i] = keep - h;
    const double down = f(x);
    x[i] = keep;
    g[i] = (up - down) / (2.0 * h);
  }
  return g;
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want, double tol,
                const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol * (1.0 + std::fabs(want[i]))) << what << " [" << i << "]";
  }
}

double Softmax(const std::vector<float>& x, std::int64_t rows, std::int64_t cols, bool log,
               const std::vector<float>& dy) {
  double total = 0.0;
  for (std::int64_t r = 0; r < rows; ++r) {
    double mx = -1e30, sum = 0.0;
    for (std::int64_t j = 0; j < cols; ++j) mx = std::max<double>(mx, x[r * cols + j]);
    for (std::int64_t j = 0; j < cols; ++j) sum += std::exp(x[r * cols + j] - mx);
    for (std::int64_t j = 0; j < cols; ++j) {
      const double ls = x[r * cols + j] - mx - std::log(sum);
      total += dy[r * cols + j] * (log ? ls : std::exp(ls));
    }
  }
  return total;
}

TEST(TrainKernelsCpuTest, LossGradientsMatchFiniteDifferences) {
  const std::int64_t rows = 4, cols = 5;
  const std::vector<float> x = Random(rows * cols, 1);
  const std::vector<std::int64_t> ids = {0, 4, 2, 2};
  std::vector<float> targets = RandomFloats(rows * cols, 2, 0.0f, 1.0f);
  for (TrainLossKind kind :
       {TrainLossKind::kCrossEntropy, TrainLossKind::kBceWithLogits, TrainLossKind::kMse}) {
    const void* labels = kind == TrainLossKind::kCrossEntropy ? static_cast<const void*>(ids.data())
                                                              : targets.data();
    auto f = [&](const std::vector<float>& at) {
      float loss = 0.0f;
      std::vector<float> grad(at.size());
      EXPECT_TRUE(
          Cpu()
              .loss(KernelContext::Cpu(), kind, at.data(), labels, rows, cols, &loss, grad.data())
              .ok());
      return static_cast<double>(loss);
    };
    float loss = 0.0f;
    std::vector<float> grad(x.size());
    ASSERT_TRUE(
        Cpu()
            .loss(KernelContext::Cpu(), kind, x.data(), labels, rows, cols, &loss, grad.data())
            .ok());
    ExpectNear(grad, NumericGrad(f, x), 2e-3, "loss gradient");
  }
  const std::vector<std::int64_t> bad = {0, 5, 1, 1};
  float loss = 0.0f;
  std::vector<float> grad(x.size());
  const absl::Status refused = Cpu().loss(KernelContext::Cpu(), TrainLossKind::kCrossEntropy,
                                          x.data(), bad.data(), rows, cols, &loss, grad.data());
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
}

TEST(TrainKernelsCpuTest, SoftmaxActivationAndLayerNormBackwardMatchFiniteDifferences) {
  const std::int64_t rows = 3, cols = 6, n = rows * cols;
  const std::vector<float> x = Random(n, 3);
  const std::vector<float> dy = Random(n, 4);
  for (bool log : {false, true}) {
    std::vector<float> y(n);
    for (std::int64_t r = 0; r < rows; ++r) {
      double mx = -1e30, sum = 0.0;
      for (std::int64_t j = 0; j < cols; ++j) mx = std::max<double>(mx, x[r * cols + j]);
      for (std::int64_t j = 0; j < cols; ++j) sum += std::exp(x[r * cols + j] - mx);
      for (std::int64_t j = 0; j < cols; ++j) {
        const double ls = x[r * cols + j] - mx - std::log(sum);
        y[r * cols + j] = static_cast<float>(log ? ls : std::exp(ls));
      }
    }
    std::vector<float> dx(n);
    ASSERT_TRUE(Cpu()
                    .softmax_backward(KernelContext::Cpu(), log, y.data(), dy.data(), dx.data(),
                                      rows, cols, false)
                    .ok());
    ExpectNear(
        dx,
        NumericGrad([&](const std::vector<float>& at) { return Softmax(at, rows, cols, log, dy); },
                    x),
        2e-3, log ? "LogSoftmax" : "Softmax");
  }
  for (ActivationKind kind : {ActivationKind::kSigmoid, ActivationKind::kTanh}) {
    auto act = [kind](double v) {
      return kind == ActivationKind::kTanh ? std::tanh(v) : 1.0 / (1.0 + std::exp(-v));
    };
    std::vector<float> y(n);
    for (std::int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(act(x[i]));
    std::vector<float> dx(n, 1.0f);
    // Accumulating adds onto what the gradient held (1 here).
    ASSERT_TRUE(Cpu()
                    .activation_backward(KernelContext::Cpu(), kind, y.data(), dy.data(), dx.data(),
                                         n, true)
                    .ok());
    for (float& v : dx) v -= 1.0f;
    ExpectNear(dx,
               NumericGrad(
                   [&](const std::vector<float>& at) {
                     double s = 0.0;
                     for (std::int64_t i = 0; i < n; ++i) s += dy[i] * act(at[i]);
                     return s;
                   },
                   x),
               2e-3, "activation");
  }
  // LayerNorm: L = sum dy * ((x - mean) inv_std * scale + bias), per row.
  const std::vector<float> scale = Random(cols, 5);
  auto layer_norm = [&](const std::vector<float>& at, std::vector<float>* mean,
                        std::vector<float>* inv_std) {
    double total = 0.0;
    for (std::int64_t r = 0; r < rows; ++r) {
      double mu = 0.0, var = 0.0;
      for (std::int64_t j = 0; j < cols; ++j) mu += at[r * cols + j];
      mu /= cols;
      for (std::int64_t j = 0; j < cols; ++j)
        var += (at[r * cols + j] - mu) * (at[r * cols + j] - mu);
      const double is = 1.0 / std::sqrt(var / cols + 1e-5);
      if (mean != nullptr) (*mean)[r] = static_cast<float>(mu);
      if (inv_std != nullptr) (*inv_std)[r] = static_cast<float>(is);
      for (std::int64_t j = 0; j < cols; ++j)
        total += dy[r * cols + j] * (at[r * cols + j] - mu) * is * scale[j];
    }
    return total;
  };
  std::vector<float> mean(rows), inv_std(rows), dx(n), dscale(cols), dbias(cols);
  layer_norm(x, &mean, &inv_std);
  std::vector<float> xhat(n);
  for (std::int64_t e = 0; e < n; ++e) xhat[e] = (x[e] - mean[e / cols]) * inv_std[e / cols];
  ASSERT_TRUE(Cpu()
                  .layer_norm_backward(KernelContext::Cpu(), xhat.data(), scale.data(),
                                       inv_std.data(), dy.data(), rows, cols, dx.data(),
                                       dscale.data(), dbias.data(), false)
                  .ok());
  ExpectNear(dx,
             NumericGrad(
                 [&](const std::vector<float>& at) { return layer_norm(at, nullptr, nullptr); }, x),
             2e-3, "LayerNorm dx");
  for (std::int64_t j = 0; j < cols; ++j) {
    double ds = 0.0, db = 0.0;
    for (std::int64_t r = 0; r < rows; ++r) {
      ds += dy[r * cols + j] * (x[r * cols + j] - mean[r]) * inv_std[r];
      db += dy[r * cols + j];
    }
    EXPECT_NEAR(dscale[j], ds, 1e-4);
    EXPECT_NEAR(dbias[j], db, 1e-4);
  }
}

TEST(TrainKernelsCpuTest, RowScatterRefusesAnIdOutsideTheTable) {
  const std::vector<std::int64_t> ids = {1, 3, 1};
  const std::vector<float> grad = {1, 2, 3, 4, 5, 6};
  std::vector<float> table(8, 0.0f);
  ASSERT_TRUE(
      Cpu().add_rows(KernelContext::Cpu(), ids.data(), 3, grad.data(), 2, table.data(), 4).ok());
  EXPECT_EQ(table, (std::vector<float>{0, 0, 6, 8, 0, 0, 3, 4}));
  const std::vector<std::int64_t> bad = {4};
  const absl::Status refused =
      Cpu().add_rows(KernelContext::Cpu(), bad.data(), 1, grad.data(), 2, table.data(), 4);
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_EQ(table, (std::vector<float>{0, 0, 6, 8, 0, 0, 3, 4}));
  // A negative id counts from the end, as ONNX Gather reads it; below -rows is refused.
  const std::vector<std::int64_t> from_end = {-1, -4};
  ASSERT_TRUE(Cpu()
                  .add_rows(KernelContext::Cpu(), from_end.data(), 2, grad.data(), 2, table.data(),
                            4)
                  .ok());
  EXPECT_EQ(table, (std::vector<float>{3, 4, 6, 8, 0, 0, 4, 6}));
  const std::vector<std::int64_t> too_low = {-5};
  EXPECT_TRUE(absl::IsInvalidArgument(
      Cpu().add_rows(KernelContext::Cpu(), too_low.data(), 1, grad.data(), 2, table.data(), 4)));
}

// The row-sparse forms equal the dense ones on a gradient that is zero outside `rows`,
// and leave the other rows alone.
TEST(TrainKernelsCpuTest, RowSparseSgdAndSumSquaresMatchTheDenseFormsOnTheirRows) {
  const std::int64_t table_rows = 10, width = 3;
  const std::vector<std::int64_t> rows = {7, 2, 5};
  std::vector<float> g(table_rows * width, 0.0f);
  const std::vector<float> values = Random(table_rows * width, 50);
  for (std::int64_t r : rows) {
    for (std::int64_t j = 0; j < width; ++j) g[r * width + j] = values[r * width + j];
  }
  SgdStep step;
  step.lr = 0.1f;
  std::vector<float> dense = Random(table_rows * width, 51), sparse = dense;
  ASSERT_TRUE(Cpu().sgd_update(KernelContext::Cpu(), step, dense.data(), g.data(), nullptr,
                               table_rows * width)
                  .ok());
  ASSERT_TRUE(Cpu().sgd_update_rows(KernelContext::Cpu(), step, sparse.data(), g.data(),
                                    rows.data(), 3, width)
                  .ok());
  EXPECT_EQ(sparse, dense);
  float want = 0.0f, got = 1.0f;
  ASSERT_TRUE(Cpu().sum_squares(KernelContext::Cpu(), g.data(), table_rows * width, &want, false).ok());
  ASSERT_TRUE(
      Cpu().sum_squares_rows(KernelContext::Cpu(), g.data(), rows.data(), 3, width, &got, false).ok());
  EXPECT_NEAR(got, want, 1e-6f * want);
  step.momentum = 0.9f;
  EXPECT_TRUE(absl::IsInvalidArgument(Cpu().sgd_update_rows(
      KernelContext::Cpu(), step, sparse.data(), g.data(), rows.data(), 3, width)));
}

TEST(TrainKernelsCpuTest, FillAndAxpyWriteOrAddScaledValues) {
  std::vector<float> dst(5, 9.0f);
  ASSERT_TRUE(Cpu().fill(KernelContext::Cpu(), dst.data(), 4, 0.5f).ok());
  EXPECT_EQ(dst, (std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f, 9.0f}));
  const std::vector<float> src = {1, 2, 3, 4, 5};
  ASSERT_TRUE(Cpu().axpy(KernelContext::Cpu(), 2.0f, src.data(), dst.data(), 5, true).ok());
  EXPECT_EQ(dst, (std::vector<float>{2.5f, 4.5f, 6.5f, 8.5f, 19.0f}));
  ASSERT_TRUE(Cpu().axpy(KernelContext::Cpu(), -1.0f, src.data(), dst.data(), 3, false).ok());
  EXPECT_EQ(dst, (std::vector<float>{-1, -2, -3, 8.5f, 19.0f}));
  ASSERT_TRUE(Cpu().axpy(KernelContext::Cpu(), 1.0f, src.data(), dst.data(), 5, false).ok());
  EXPECT_EQ(dst, src);
  // In place: dst (+)= alpha dst.
  ASSERT_TRUE(Cpu().axpy(KernelContext::Cpu(), 1.0f, dst.data(), dst.data(), 5, true).ok());
  EXPECT_EQ(dst, (std::vector<float>{2, 4, 6, 8, 10}));
}

// --- CUDA against the CPU -------------------------------------------------------------

class TrainKernelsCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
    runner_ = std::make_unique<DeviceRunner>(Device::Cuda(0));
    table_ = *LookupTrainKernels(DeviceKind::kCuda);
  }
  template <typename T>
  T* Up(const std::vector<T>& values) {
    absl::StatusOr<TensorView> v =
        runner_->Upload(HostTensor::Of<T>({static_cast<int64_t>(values.size())}, values));
    EXPECT_TRUE(v.ok()) << v.status();
    views_.push_back(*v);
    return v->template as<T>();
  }
  std::vector<float> Down(const float* device, std::size_t n) {
    for (const TensorView& v : views_) {
      if (v.data == device) {
        absl::StatusOr<HostTensor> t = runner_->Download(v);
        EXPECT_TRUE(t.ok()) << t.status();
        return t.ok() ? t->Values<float>() : std::vector<float>(n);
      }
    }
    ADD_FAILURE() << "not a test buffer";
    return {};
  }
  static void ExpectClose(const std::vector<float>& got, const std::vector<float>& want,
                          const char* what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], 1e-4 * (1.0 + std::fabs(want[i]))) << what << " [" << i << "]";
    }
  }
  std::int32_t Flag() { return *runner_->context().error_flag; }

  std::unique_ptr<DeviceRunner> runner_;
  const TrainKernels* table_ = nullptr;
  std::vector<TensorView> views_;
};

TEST_F(TrainKernelsCudaTest, GemmForEveryTransposeMatchesTheCpu) {
  const std::int64_t m = 37, n = 19, k = 53;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const std::vector<float> a = Random(m * k, 10), b = Random(k * n, 11), c = Random(m * n, 12);
      std::vector<float> want = c;
      ASSERT_TRUE(Cpu()
                      .gemm(KernelContext::Cpu(), ta, tb, m, n, k, 0.5f, a.data(), b.data(), 1.0f,
                            want.data())
                      .ok());
      float* dc = Up(c);
      ASSERT_TRUE(
          table_->gemm(runner_->context(), ta, tb, m, n, k, 0.5f, Up(a), Up(b), 1.0f, dc).ok());
      ExpectClose(Down(dc, c.size()), want, "Gemm");
    }
  }
}

TEST_F(TrainKernelsCudaTest, ElementwiseSoftmaxAndLayerNormBackwardMatchTheCpu) {
  const std::int64_t rows = 33, cols = 300, n = rows * cols;
  const std::vector<float> x = Random(n, 20), dy = Random(n, 21), base = Random(n, 22);
  for (ActivationKind kind :
       {ActivationKind::kRelu, ActivationKind::kSigmoid, ActivationKind::kTanh}) {
    for (bool accumulate : {false, true}) {
      std::vector<float> want = base;
      ASSERT_TRUE(Cpu()
                      .activation_backward(KernelContext::Cpu(), kind, x.data(), dy.data(),
                                           want.data(), n, accumulate)
                      .ok());
      float* dx = Up(base);
      ASSERT_TRUE(
          table_->activation_backward(runner_->context(), kind, Up(x), Up(dy), dx, n, accumulate)
              .ok());
      ExpectClose(Down(dx, n), want, "activation backward");
    }
  }
  for (bool log : {false, true}) {
    std::vector<float> want = base;
    ASSERT_TRUE(Cpu()
                    .softmax_backward(KernelContext::Cpu(), log, x.data(), dy.data(), want.data(),
                                      rows, cols, true)
                    .ok());
    float* dx = Up(base);
    ASSERT_TRUE(
        table_->softmax_backward(runner_->context(), log, Up(x), Up(dy), dx, rows, cols, true)
            .ok());
    ExpectClose(Down(dx, n), want, "softmax backward");
  }
  const std::vector<float> scale = Random(cols, 23);
  const std::vector<float> inv_std = RandomFloats(rows, 25, 0.5f, 2.0f);
  std::vector<float> want_dx = base, want_ds = Random(cols, 26), want_db = Random(cols, 27);
  const std::vector<float> ds0 = want_ds, db0 = want_db;
  // x stands in for the forward's xhat.
  ASSERT_TRUE(Cpu()
                  .layer_norm_backward(KernelContext::Cpu(), x.data(), scale.data(), inv_std.data(),
                                       dy.data(), rows, cols, want_dx.data(), want_ds.data(),
                                       want_db.data(), true)
                  .ok());
  float* dx = Up(base);
  float* ds = Up(ds0);
  float* db = Up(db0);
  ASSERT_TRUE(table_
                  ->layer_norm_backward(runner_->context(), Up(x), Up(scale), Up(inv_std), Up(dy),
                                        rows, cols, dx, ds, db, true)
                  .ok());
  ExpectClose(Down(dx, n), want_dx, "LayerNorm dx");
  ExpectClose(Down(ds, cols), want_ds, "LayerNorm dscale");
  ExpectClose(Down(db, cols), want_db, "LayerNorm dbias");
  std::vector<float> want_sum = Random(cols, 28);
  const std::vector<float> sum0 = want_sum;
  ASSERT_TRUE(
      Cpu().sum_rows(KernelContext::Cpu(), dy.data(), rows, cols, want_sum.data(), true).ok());
  float* sum = Up(sum0);
  ASSERT_TRUE(table_->sum_rows(runner_->context(), Up(dy), rows, cols, sum, true).ok());
  ExpectClose(Down(sum, cols), want_sum, "row sum");
}

TEST_F(TrainKernelsCudaTest, LossesRowScatterAndGradNormMatchTheCpu) {
  const std::int64_t rows = 64, cols = 10;
  const std::vector<float> x = Random(rows * cols, 30);
  const std::vector<float> targets = RandomFloats(rows * cols, 31, 0.0f, 1.0f);
  std::vector<std::int64_t> ids(rows);
  for (std::int64_t r = 0; r < rows; ++r) ids[r] = (r * 7) % cols;
  for (TrainLossKind kind :
       {TrainLossKind::kCrossEntropy, TrainLossKind::kBceWithLogits, TrainLossKind::kMse}) {
    const bool ce = kind == TrainLossKind::kCrossEntropy;
    float want_loss = 0.0f;
    std::vector<float> want_grad(x.size());
    ASSERT_TRUE(Cpu()
                    .loss(KernelContext::Cpu(), kind, x.data(),
                          ce ? static_cast<const void*>(ids.data()) : targets.data(), rows, cols,
                          &want_loss, want_grad.data())
                    .ok());
    float* grad = Up(std::vector<float>(x.size()));
    float* loss = Up(std::vector<float>{123.0f});
    const void* labels = ce ? static_cast<const void*>(Up(ids)) : Up(targets);
    ASSERT_TRUE(table_->loss(runner_->context(), kind, Up(x), labels, rows, cols, loss, grad).ok());
    ExpectClose(Down(grad, x.size()), want_grad, "loss gradient");
    ExpectClose(Down(loss, 1), {want_loss}, "loss");
  }
  EXPECT_EQ(Flag(), 0);

  // Repeated ids add up (atomics); an id outside the table sets the flag, adds nothing.
  const std::int64_t width = 16, table_rows = 8, count = 100;
  std::vector<std::int64_t> rows_ids(count);
  // Every other id counts from the end.
  for (std::int64_t i = 0; i < count; ++i) {
    rows_ids[i] = (i * 3) % table_rows - (i % 2 == 1 ? table_rows : 0);
  }
  const std::vector<float> g = Random(count * width, 32), t0 = Random(table_rows * width, 33);
  std::vector<float> want = t0;
  ASSERT_TRUE(Cpu()
                  .add_rows(KernelContext::Cpu(), rows_ids.data(), count, g.data(), width,
                            want.data(), table_rows)
                  .ok());
  float* table = Up(t0);
  ASSERT_TRUE(
      table_->add_rows(runner_->context(), Up(rows_ids), count, Up(g), width, table, table_rows)
          .ok());
  ExpectClose(Down(table, want.size()), want, "Gather backward");
  EXPECT_EQ(Flag(), 0);

  float want_sq = 0.0f;
  ASSERT_TRUE(Cpu().sum_squares(KernelContext::Cpu(), g.data(), g.size(), &want_sq, false).ok());
  float* sq = Up(std::vector<float>{5.0f});
  ASSERT_TRUE(table_->sum_squares(runner_->context(), Up(g), g.size(), sq, false).ok());
  ExpectClose(Down(sq, 1), {want_sq}, "sum of squares");

  // Ids past either end (8 and -9 in a table of 8 rows) raise the flag; the rows no id
  // names (all but row 2) keep their values.
  const std::vector<std::int64_t> bad = {2, table_rows, -table_rows - 1};
  float* bad_table = Up(t0);
  ASSERT_TRUE(table_->add_rows(runner_->context(), Up(bad), 3, Up(Random(3 * width, 34)), width,
                               bad_table, table_rows)
                  .ok());
  const std::vector<float> after = Down(bad_table, t0.size());
  EXPECT_NE(Flag(), 0) << "an id outside the table must raise the error flag";
  for (std::int64_t r = 0; r < table_rows; ++r) {
    if (r == 2) continue;
    for (std::int64_t j = 0; j < width; ++j) {
      EXPECT_EQ(after[r * width + j], t0[r * width + j]) << "row " << r << " changed";
    }
  }
  *runner_->context().error_flag = 0;
}

TEST_F(TrainKernelsCudaTest, FillAndAxpyMatchTheCpu) {
  const std::int64_t n = 3000;
  const std::vector<float> src = Random(n, 40), start = Random(n, 41);
  float* dst = Up(start);
  ASSERT_TRUE(table_->fill(runner_->context(), dst, n, 0.25f).ok());
  ExpectClose(Down(dst, n), std::vector<float>(n, 0.25f), "fill");
  for (bool accumulate : {true, false}) {
    std::vector<float> want = start;
    ASSERT_TRUE(Cpu().axpy(KernelContext::Cpu(), -1.5f, src.data(), want.data(), n, accumulate).ok());
    float* got = Up(start);
    ASSERT_TRUE(table_->axpy(runner_->context(), -1.5f, Up(src), got, n, accumulate).ok());
    ExpectClose(Down(got, n), want, accumulate ? "axpy accumulating" : "axpy writing");
  }
}

TEST_F(TrainKernelsCudaTest, RowSparseSgdAndSumSquaresMatchTheCpu) {
  const std::int64_t table_rows = 500, width = 16;
  std::vector<std::int64_t> rows;
  for (std::int64_t r = table_rows - 1; r >= 0; r -= 3) rows.push_back(r);
  const auto count = static_cast<std::int64_t>(rows.size());
  const std::vector<float> g = Random(table_rows * width, 60), w0 = Random(table_rows * width, 61);
  SgdStep step;
  step.lr = 0.05f;
  step.weight_decay = 0.01f;
  std::vector<float> want = w0;
  ASSERT_TRUE(Cpu().sgd_update_rows(KernelContext::Cpu(), step, want.data(), g.data(), rows.data(),
                                    count, width)
                  .ok());
  float* w = Up(w0);
  const float* dg = Up(g);
  const std::int64_t* drows = Up(rows);
  ASSERT_TRUE(table_->sgd_update_rows(runner_->context(), step, w, dg, drows, count, width).ok());
  ExpectClose(Down(w, want.size()), want, "row-sparse SGD");
  float want_sq = 0.0f;
  ASSERT_TRUE(Cpu().sum_squares_rows(KernelContext::Cpu(), g.data(), rows.data(), count, width,
                                     &want_sq, false)
                  .ok());
  float* sq = Up(std::vector<float>{7.0f});
  ASSERT_TRUE(table_->sum_squares_rows(runner_->context(), dg, drows, count, width, sq, false).ok());
  ExpectClose(Down(sq, 1), {want_sq}, "row-sparse sum of squares");
}

TEST_F(TrainKernelsCudaTest, SgdMomentumAndAdamUpdatesMatchTheCpuOverFiveSteps) {
  const std::int64_t n = 1000;
  const std::vector<float> w0 = Random(n, 40);
  std::vector<std::vector<float>> grads;
  for (int s = 0; s < 5; ++s) grads.push_back(Random(n, 41 + s));
  for (int variant = 0; variant < 4; ++variant) {
    std::vector<float> w = w0, buf(n), m(n), v(n);
    float* dw = Up(w0);
    float* dbuf = Up(std::vector<float>(n));
    float* dm = Up(std::vector<float>(n));
    float* dv = Up(std::vector<float>(n));
    for (int s = 0; s < 5; ++s) {
      float* dg = Up(grads[s]);
      if (variant < 3) {
        SgdStep o;
        o.lr = 0.05f;
        o.momentum = variant == 0 ? 0.0f : 0.9f;
        o.nesterov = variant == 2;
        o.weight_decay = variant == 2 ? 0.01f : 0.0f;
        o.first_step = s == 0;
        ASSERT_TRUE(
            Cpu()
                .sgd_update(KernelContext::Cpu(), o, w.data(), grads[s].data(), buf.data(), n)
                .ok());
        ASSERT_TRUE(table_->sgd_update(runner_->context(), o, dw, dg, dbuf, n).ok());
      } else {
        AdamStep o;
        o.step_size = static_cast<float>(1e-3 / (1.0 - std::pow(0.9, s + 1)));
        o.sqrt_c2 = static_cast<float>(std::sqrt(1.0 - std::pow(0.999, s + 1)));
        ASSERT_TRUE(Cpu()
                        .adam_update(KernelContext::Cpu(), o, w.data(), grads[s].data(), m.data(),
                                     v.data(), n)
                        .ok());
        ASSERT_TRUE(table_->adam_update(runner_->context(), o, dw, dg, dm, dv, n).ok());
      }
    }
    ExpectClose(Down(dw, n), w, variant < 3 ? "SGD" : "Adam");
  }
}

TEST_F(TrainKernelsCudaTest, BadCallsAreStatusesNotCrashes) {
  KernelContext cpu = KernelContext::Cpu();
  EXPECT_TRUE(absl::IsInvalidArgument(table_->sum_squares(cpu, nullptr, 0, nullptr, false)));
  float* out = Up(std::vector<float>{0.0f});
  EXPECT_TRUE(
      absl::IsInvalidArgument(table_->sum_squares(runner_->context(), nullptr, 4, out, false)));
  EXPECT_TRUE(absl::IsInvalidArgument(table_->activation_backward(
      runner_->context(), ActivationKind::kRelu, out, out, out, -1, false)));
  KernelContext no_flag = runner_->context();
  no_flag.error_flag = nullptr;
  const std::vector<std::int64_t> ids = {0};
  EXPECT_TRUE(absl::IsFailedPrecondition(table_->add_rows(no_flag, Up(ids), 1, out, 1, out, 1)));
}

}  // namespace
}  // namespace ndserve::kernels
