#ifndef NDSERVE_ENGINE_STATUS_MACROS_H_
#define NDSERVE_ENGINE_STATUS_MACROS_H_

// Early-return helpers for absl::Status / StatusOr inside engine/. Prefixed NDE_ so they
// cannot collide with the kernels' NDK_ macros or a project-wide set added later.

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define NDE_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::absl::Status nde_status_ = (expr);       \
    if (!nde_status_.ok()) return nde_status_; \
  } while (false)

#define NDE_CONCAT_INNER_(a, b) a##b
#define NDE_CONCAT_(a, b) NDE_CONCAT_INNER_(a, b)
#define NDE_ASSIGN_OR_RETURN(lhs, expr) \
  NDE_ASSIGN_OR_RETURN_IMPL_(NDE_CONCAT_(nde_statusor_, __LINE__), lhs, expr)
#define NDE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()

#endif  // NDSERVE_ENGINE_STATUS_MACROS_H_
