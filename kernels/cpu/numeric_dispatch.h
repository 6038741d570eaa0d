#ifndef NDSERVE_KERNELS_CPU_NUMERIC_DISPATCH_H_
#define NDSERVE_KERNELS_CPU_NUMERIC_DISPATCH_H_

// The element-type switch of the CPU kernels whose rules admit FP32, INT32 and INT64.

#include <cstdint>

#include "absl/status/status.h"
#include "memory/dtype.h"

namespace ndserve::kernels::cpu {

// Calls f(T{}) for the FP32, INT32 or INT64 element type `dtype`; INTERNAL for any other
// (the op's Infer rule admits none, so reaching it is an engine bug).
template <typename F>
absl::Status ForNumeric(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFp32:
      f(float{});
      return absl::OkStatus();
    case DType::kInt32:
      f(int32_t{});
      return absl::OkStatus();
    case DType::kInt64:
      f(int64_t{});
      return absl::OkStatus();
    default:
      return absl::InternalError("math op: unexpected dtype");
  }
}

}  // namespace ndserve::kernels::cpu

#endif  // NDSERVE_KERNELS_CPU_NUMERIC_DISPATCH_H_
