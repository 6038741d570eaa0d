#ifndef NDSERVE_ENGINE_PREDICTOR_CONTEXT_UTIL_H_
#define NDSERVE_ENGINE_PREDICTOR_CONTEXT_UTIL_H_

// Helpers the two halves of PredictorContext (predictor_context.cc, and
// predictor_context_loop.cc for Loop) share. Internal to them.

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/graph.h"
#include "kernels/op_kind.h"
#include "kernels/tensor_view.h"
#include "memory/nd_array.h"

namespace ndserve::engine::predictor_context_internal {

// `status` with "node '<name>' (<op>): " in front (OK stays OK).
inline absl::Status AtNode(const absl::Status& status, const Node& node) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat("node '", node.name, "' (", kernels::OpKindName(node.op),
                                   "): ", status.message()));
}

// The kernels' view of `array` under `shape`.
inline absl::StatusOr<kernels::TensorView> ViewOf(const NDArray& array, kernels::ShapeSpan shape) {
  kernels::TensorView view;
  NDS_ASSIGN_OR_RETURN(view.data, array.Data());
  view.dtype = array.dtype();
  view.shape = kernels::Shape(shape.begin(), shape.end());
  view.device = array.device();
  return view;
}

}  // namespace ndserve::engine::predictor_context_internal

#endif  // NDSERVE_ENGINE_PREDICTOR_CONTEXT_UTIL_H_
