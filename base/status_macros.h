#ifndef NDSERVE_BASE_STATUS_MACROS_H_
#define NDSERVE_BASE_STATUS_MACROS_H_

// Early-return helpers for absl::Status / StatusOr, shared by every layer (Debian 12's
// Abseil has no public equivalents). Prefixed NDS_ so they cannot collide with the
// RETURN_IF_ERROR macros of other libraries.

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define NDS_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::absl::Status nds_status_ = (expr);       \
    if (!nds_status_.ok()) return nds_status_; \
  } while (false)

#define NDS_CONCAT_INNER_(a, b) a##b
#define NDS_CONCAT_(a, b) NDS_CONCAT_INNER_(a, b)
#define NDS_ASSIGN_OR_RETURN(lhs, expr) \
  NDS_ASSIGN_OR_RETURN_IMPL_(NDS_CONCAT_(nds_statusor_, __LINE__), lhs, expr)
#define NDS_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()

#endif  // NDSERVE_BASE_STATUS_MACROS_H_
