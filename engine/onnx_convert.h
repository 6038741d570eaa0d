#ifndef NDSERVE_ENGINE_ONNX_CONVERT_H_
#define NDSERVE_ENGINE_ONNX_CONVERT_H_

// ONNX protobuf pieces into the engine's graph IR: value infos, tensors, attributes,
// Constant nodes. Internal to the loader (onnx_loader.cc, subgraph_inliner.cc): the one
// place besides them where ONNX's protobuf types appear, so the rest of engine/ never
// sees them.

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/graph.h"
#include "engine/tensor_spec.h"
#include "kernels/node_attrs.h"
#include "onnx/onnx_pb.h"

namespace ndserve::engine {

// `status` with "<prefix>: " before its message (OK stays OK).
absl::Status Prefixed(const absl::Status& status, absl::string_view prefix);

bool IsDefaultDomain(absl::string_view domain);

// A graph input's or output's declaration; `kind` names it in errors. Sequences and maps
// are UNIMPLEMENTED.
absl::StatusOr<TensorSpec> ToTensorSpec(const onnx::ValueInfoProto& vi, absl::string_view kind);

// Checks `t`'s bytes against its shape and moves them into `out` (raw_data is taken,
// not copied). `what` names the tensor in errors; empty: "initializer '<name>'".
absl::Status ConvertInitializer(onnx::TensorProto& t, Initializer* out,
                                absl::string_view what = "");

// One attribute as the kernels' rules read it (GRAPH attributes are the inliner's).
absl::StatusOr<kernels::AttrValue> ConvertAttribute(const onnx::AttributeProto& a);

// A Constant node's value as an initializer named after its output, so everything
// downstream (host inputs, constant folding, upload) treats exporters' Constants exactly
// like graph initializers. Exactly one value attribute must be set.
absl::Status ConstantToInitializer(onnx::NodeProto& n, Initializer* out);

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_ONNX_CONVERT_H_
