#ifndef NDSERVE_KERNELS_STATUS_MACROS_H_
#define NDSERVE_KERNELS_STATUS_MACROS_H_

// Early-return helpers for absl::Status / StatusOr inside kernels/. Prefixed NDK_ so they
// cannot collide with project-wide macros another module may define later.

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define NDK_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::absl::Status ndk_status_ = (expr);       \
    if (!ndk_status_.ok()) return ndk_status_; \
  } while (false)

#define NDK_CONCAT_INNER_(a, b) a##b
#define NDK_CONCAT_(a, b) NDK_CONCAT_INNER_(a, b)
#define NDK_ASSIGN_OR_RETURN(lhs, expr) \
  NDK_ASSIGN_OR_RETURN_IMPL_(NDK_CONCAT_(ndk_statusor_, __LINE__), lhs, expr)
#define NDK_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()

#endif  // NDSERVE_KERNELS_STATUS_MACROS_H_
