#include "train/cpu_math.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ndserve::train {

std::int64_t NumElements(absl::Span<const std::int64_t> shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

absl::StatusOr<float*> F32(const NDArray& array) { return array.DataAs<float>(); }

absl::StatusOr<NDArray> NewF32(NDManager& scope, absl::Span<const std::int64_t> shape) {
  return scope.Create(shape, DType::kFp32);
}

absl::StatusOr<NDArray> ZerosF32(NDManager& scope, absl::Span<const std::int64_t> shape) {
  return scope.Zeros(shape, DType::kFp32);
}

absl::StatusOr<Dims> BroadcastShapes(absl::Span<const std::int64_t> a,
                                     absl::Span<const std::int64_t> b) {
  const std::size_t rank = std::max(a.size(), b.size());
  Dims out(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    const std::int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const std::int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      return absl::InvalidArgumentError(absl::StrCat("shapes [", absl::StrJoin(a, ","),
                                                     "] and [", absl::StrJoin(b, ","),
                                                     "] do not broadcast"));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<std::int64_t> BroadcastOffsets(absl::Span<const std::int64_t> in,
                                           absl::Span<const std::int64_t> out) {
  const std::size_t rank = out.size();
  Dims strides(rank, 0);
  std::int64_t stride = 1;
  for (std::size_t i = in.size(); i-- > 0;) {
    const std::size_t o = i + (rank - in.size());
    strides[o] = in[i] == 1 ? 0 : stride;
    stride *= in[i];
  }
  const std::int64_t total = NumElements(out);
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(total));
  Dims index(rank, 0);
  std::int64_t offset = 0;
  for (std::int64_t e = 0; e < total; ++e) {
    offsets[static_cast<std::size_t>(e)] = offset;
    for (std::size_t d = rank; d-- > 0;) {
      if (++index[d] < out[d]) {
        offset += strides[d];
        break;
      }
      offset -= strides[d] * (out[d] - 1);
      index[d] = 0;
    }
  }
  return offsets;
}

void ReduceToShape(const float* grad, absl::Span<const std::int64_t> out,
                   absl::Span<const std::int64_t> in, float* dst, bool accumulate) {
  const std::int64_t n_in = NumElements(in);
  const std::int64_t n_out = NumElements(out);
  if (n_in == n_out) {
    Store(dst, grad, n_in, accumulate);
    return;
  }
  if (!accumulate) std::fill(dst, dst + n_in, 0.0f);
  // The common bias case: `in` is the trailing block of `out`.
  if (n_out % n_in == 0 && in.size() <= out.size() &&
      std::equal(in.begin(), in.end(), out.end() - static_cast<std::ptrdiff_t>(in.size()))) {
    for (std::int64_t r = 0; r < n_out / n_in; ++r) {
      const float* row = grad + r * n_in;
      for (std::int64_t j = 0; j < n_in; ++j) dst[j] += row[j];
    }
    return;
  }
  const std::vector<std::int64_t> offsets = BroadcastOffsets(in, out);
  for (std::int64_t e = 0; e < n_out; ++e) dst[offsets[static_cast<std::size_t>(e)]] += grad[e];
}

void Sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
           float alpha, const float* a, const float* b, float beta, float* c) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), alpha, a, static_cast<int>(trans_a ? m : k), b,
              static_cast<int>(trans_b ? k : n), beta, c, static_cast<int>(n));
}

void Store(float* dst, const float* src, std::int64_t n, bool accumulate) {
  if (accumulate) {
    for (std::int64_t i = 0; i < n; ++i) dst[i] += src[i];
  } else if (n > 0) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float));
  }
}

absl::StatusOr<std::int64_t> NormAxis(std::int64_t axis, std::size_t rank, const char* op) {
  const auto r = static_cast<std::int64_t>(rank);
  if (axis < -r || axis >= r) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": axis ", axis, " out of range for rank ", r));
  }
  return axis < 0 ? axis + r : axis;
}

}  // namespace ndserve::train
