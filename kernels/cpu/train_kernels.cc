// The CPU training math (kernels/train_kernels.h): plain loops and OpenBLAS, the
// reference the CUDA table is checked against (tests/unit/kernels/train_kernels_test.cc).
#include "kernels/train_kernels.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace ndserve::kernels::cpu {
namespace {

void Put(float* dst, float value, bool accumulate) { *dst = accumulate ? *dst + value : value; }

absl::Status Gemm(const KernelContext&, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
                  std::int64_t k, float alpha, const float* a, const float* b, float beta,
                  float* c) {
  if (m < 0 || n < 0 || k < 0 || m > INT_MAX || n > INT_MAX || k > INT_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("training Gemm: dimensions ", m, "x", n, "x", k, " out of range"));
  }
  if (m == 0 || n == 0) return absl::OkStatus();
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), alpha, a, static_cast<int>(trans_a ? m : k), b,
              static_cast<int>(trans_b ? k : n), beta, c, static_cast<int>(n));
  return absl::OkStatus();
}

// One plain loop per (activation, accumulate) pair, so each vectorizes.
// `grad(s, g)`: the input's gradient from the output s and its gradient g.
template <typename Grad>
void ActivationLoop(const float* saved, const float* dy, float* dx, std::int64_t n,
                    bool accumulate, Grad grad) {
  if (accumulate) {
    for (std::int64_t i = 0; i < n; ++i) dx[i] += grad(saved[i], dy[i]);
  } else {
    for (std::int64_t i = 0; i < n; ++i) dx[i] = grad(saved[i], dy[i]);
  }
}

absl::Status ActivationBackward(const KernelContext&, ActivationKind kind, const float* saved,
                                const float* dy, float* dx, std::int64_t n, bool accumulate) {
  switch (kind) {
    case ActivationKind::kRelu:
      ActivationLoop(saved, dy, dx, n, accumulate, [](float s, float g) { return s > 0.0f ? g : 0.0f; });
      break;
    case ActivationKind::kSigmoid:
      ActivationLoop(saved, dy, dx, n, accumulate, [](float s, float g) { return g * s * (1.0f - s); });
      break;
    case ActivationKind::kTanh:
      ActivationLoop(saved, dy, dx, n, accumulate, [](float s, float g) { return g * (1.0f - s * s); });
      break;
  }
  return absl::OkStatus();
}

absl::Status SoftmaxBackward(const KernelContext&, bool log, const float* y, const float* dy,
                             float* dx, std::int64_t rows, std::int64_t cols, bool accumulate) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* yr = y + r * cols;
    const float* gr = dy + r * cols;
    float* dr = dx + r * cols;
    float dot = 0.0f;
    for (std::int64_t j = 0; j < cols; ++j) dot += log ? gr[j] : gr[j] * yr[j];
    for (std::int64_t j = 0; j < cols; ++j) {
      Put(dr + j, log ? gr[j] - std::exp(yr[j]) * dot : yr[j] * (gr[j] - dot), accumulate);
    }
  }
  return absl::OkStatus();
}

absl::Status Loss(const KernelContext&, TrainLossKind kind, const float* x, const void* labels,
                  std::int64_t rows, std::int64_t cols, float* loss, float* grad) {
  double total = 0.0;
  if (kind == TrainLossKind::kCrossEntropy) {
    const auto* ids = static_cast<const std::int64_t*>(labels);
    for (std::int64_t r = 0; r < rows; ++r) {
      if (ids[r] < 0 || ids[r] >= cols) {
        return absl::InvalidArgumentError(
            absl::StrCat("CrossEntropyLoss: label ", ids[r], " outside [0, ", cols, ")"));
      }
      const float* xr = x + r * cols;
      const float mx = *std::max_element(xr, xr + cols);
      float sum = 0.0f;
      for (std::int64_t j = 0; j < cols; ++j) sum += std::exp(xr[j] - mx);
      const float lse = mx + std::log(sum);
      total += lse - xr[ids[r]];
      for (std::int64_t j = 0; j < cols; ++j) {
        grad[r * cols + j] =
            (std::exp(xr[j] - lse) - (j == ids[r] ? 1.0f : 0.0f)) / static_cast<float>(rows);
      }
    }
    *loss = rows == 0 ? 0.0f : static_cast<float>(total / static_cast<double>(rows));
    return absl::OkStatus();
  }
  const auto* t = static_cast<const float*>(labels);
  const std::int64_t n = rows * cols;
  for (std::int64_t e = 0; e < n; ++e) {
    if (kind == TrainLossKind::kBceWithLogits) {
      total += std::max(x[e], 0.0f) - x[e] * t[e] + std::log1p(std::exp(-std::fabs(x[e])));
      grad[e] = (1.0f / (1.0f + std::exp(-x[e])) - t[e]) / static_cast<float>(n);
    } else {
      const float diff = x[e] - t[e];
      total += static_cast<double>(diff) * diff;
      grad[e] = 2.0f * diff / static_cast<float>(n);
    }
  }
  *loss = n == 0 ? 0.0f : static_cast<float>(total / static_cast<double>(n));
  return absl::OkStatus();
}

absl::Status SumRows(const KernelContext&, const float* src, std::int64_t rows, std::int64_t cols,
                     float* dst, bool accumulate) {
  if (!accumulate) std::fill(dst, dst + cols, 0.0f);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < cols; ++j) dst[j] += src[r * cols + j];
  }
  return absl::OkStatus();
}

absl::Status AddRows(const KernelContext&, const std::int64_t* ids, std::int64_t count,
                     const float* grad, std::int64_t width, float* table_grad,
                     std::int64_t table_rows) {
  for (std::int64_t i = 0; i < count; ++i) {
    if (ids[i] < -table_rows || ids[i] >= table_rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("Gather: index ", ids[i], " outside [", -table_rows, ", ", table_rows, ")"));
    }
  }
  for (std::int64_t i = 0; i < count; ++i) {
    float* dst = table_grad + (ids[i] < 0 ? ids[i] + table_rows : ids[i]) * width;
    for (std::int64_t j = 0; j < width; ++j) dst[j] += grad[i * width + j];
  }
  return absl::OkStatus();
}

absl::Status LayerNormBackward(const KernelContext&, const float* xhat, const float* scale,
                               const float* inv_std, const float* dy, std::int64_t rows,
                               std::int64_t cols, float* dx, float* dscale, float* dbias,
                               bool accumulate) {
  if (!accumulate) {
    if (dscale != nullptr) std::fill(dscale, dscale + cols, 0.0f);
    if (dbias != nullptr) std::fill(dbias, dbias + cols, 0.0f);
  }
  const float inv_cols = 1.0f / static_cast<float>(cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* hr = xhat + r * cols;
    const float* gr = dy + r * cols;
    if (dx != nullptr) {
      float sum_g = 0.0f, sum_gh = 0.0f;
      for (std::int64_t j = 0; j < cols; ++j) {
        const float g = gr[j] * scale[j];
        sum_g += g;
        sum_gh += g * hr[j];
      }
      for (std::int64_t j = 0; j < cols; ++j) {
        const float g = gr[j] * scale[j];
        Put(dx + r * cols + j, inv_std[r] * (g - inv_cols * sum_g - hr[j] * inv_cols * sum_gh),
            accumulate);
      }
    }
    for (std::int64_t j = 0; j < cols; ++j) {
      if (dscale != nullptr) dscale[j] += gr[j] * hr[j];
      if (dbias != nullptr) dbias[j] += gr[j];
    }
  }
  return absl::OkStatus();
}

// w -= lr (g + decay w): plain SGD, the dense update's and the row-sparse one's loop.
// Takes the settings by value: read through the step struct inside the loop they would
// be reloaded after every store to w (which could alias them), and it would not vectorize.
inline void PlainSgd(float lr, float decay, float* w, const float* g, std::int64_t n) {
  for (std::int64_t j = 0; j < n; ++j) w[j] -= lr * (g[j] + decay * w[j]);
}

absl::Status SgdUpdate(const KernelContext&, const SgdStep& o, float* w, const float* g, float* buf,
                       std::int64_t n) {
  if (o.momentum > 0.0f && buf == nullptr) {
    return absl::InvalidArgumentError("SGD with momentum needs its buffer");
  }
  // The settings as locals, as in PlainSgd.
  const float lr = o.lr, decay = o.weight_decay, momentum = o.momentum;
  if (momentum == 0.0f) {
    PlainSgd(lr, decay, w, g, n);
    return absl::OkStatus();
  }
  const bool first = o.first_step, nesterov = o.nesterov;
  for (std::int64_t j = 0; j < n; ++j) {
    const float d = g[j] + decay * w[j];
    const float b = first ? d : momentum * buf[j] + d;
    buf[j] = b;
    w[j] -= lr * (nesterov ? d + momentum * b : b);
  }
  return absl::OkStatus();
}

absl::Status AdamUpdate(const KernelContext&, const AdamStep& o, float* w, const float* g, float* m,
                        float* v, std::int64_t n) {
  // Locals for the same reason as in PlainSgd.
  const float decay = o.weight_decay, beta1 = o.beta1, beta2 = o.beta2, step = o.step_size,
              sqrt_c2 = o.sqrt_c2, epsilon = o.epsilon;
  for (std::int64_t j = 0; j < n; ++j) {
    const float d = g[j] + decay * w[j];
    const float mj = beta1 * m[j] + (1.0f - beta1) * d;
    const float vj = beta2 * v[j] + (1.0f - beta2) * d * d;
    m[j] = mj;
    v[j] = vj;
    w[j] -= step * mj / (std::sqrt(vj) / sqrt_c2 + epsilon);
  }
  return absl::OkStatus();
}

absl::Status SumSquares(const KernelContext&, const float* x, std::int64_t n, float* out,
                        bool accumulate) {
  double sum = 0.0;
  for (std::int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  Put(out, static_cast<float>(sum), accumulate);
  return absl::OkStatus();
}

absl::Status SgdUpdateRows(const KernelContext&, const SgdStep& o, float* w, const float* g,
                           const std::int64_t* rows, std::int64_t count, std::int64_t width) {
  if (o.momentum > 0.0f) {
    return absl::InvalidArgumentError("row-sparse SGD has no momentum buffer");
  }
  for (std::int64_t i = 0; i < count; ++i) {
    PlainSgd(o.lr, o.weight_decay, w + rows[i] * width, g + rows[i] * width, width);
  }
  return absl::OkStatus();
}

absl::Status SumSquaresRows(const KernelContext&, const float* x, const std::int64_t* rows,
                            std::int64_t count, std::int64_t width, float* out, bool accumulate) {
  double sum = 0.0;
  for (std::int64_t i = 0; i < count; ++i) {
    const float* xr = x + rows[i] * width;
    float row = 0.0f;  // a row is short; the rows add up in double
    for (std::int64_t j = 0; j < width; ++j) row += xr[j] * xr[j];
    sum += row;
  }
  Put(out, static_cast<float>(sum), accumulate);
  return absl::OkStatus();
}

absl::Status Fill(const KernelContext&, float* dst, std::int64_t n, float value) {
  if (n > 0) std::fill(dst, dst + n, value);
  return absl::OkStatus();
}

absl::Status Axpy(const KernelContext&, float alpha, const float* src, float* dst, std::int64_t n,
                  bool accumulate) {
  if (accumulate) {
    for (std::int64_t i = 0; i < n; ++i) dst[i] += alpha * src[i];
  } else if (alpha == 1.0f) {
    if (n > 0 && dst != src) std::copy(src, src + n, dst);
  } else {
    for (std::int64_t i = 0; i < n; ++i) dst[i] = alpha * src[i];
  }
  return absl::OkStatus();
}

constexpr TrainKernels kTable = {
    .gemm = Gemm,
    .activation_backward = ActivationBackward,
    .softmax_backward = SoftmaxBackward,
    .loss = Loss,
    .sum_rows = SumRows,
    .add_rows = AddRows,
    .layer_norm_backward = LayerNormBackward,
    .sgd_update = SgdUpdate,
    .adam_update = AdamUpdate,
    .sum_squares = SumSquares,
    .sgd_update_rows = SgdUpdateRows,
    .sum_squares_rows = SumSquaresRows,
    .fill = Fill,
    .axpy = Axpy,
};

}  // namespace

const TrainKernels& TrainKernelTable() { return kTable; }

}  // namespace ndserve::kernels::cpu
