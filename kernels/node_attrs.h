#ifndef NDSERVE_KERNELS_NODE_ATTRS_H_
#define NDSERVE_KERNELS_NODE_ATTRS_H_

// From ONNX node attributes (as the engine reads them out of a NodeProto) to the resolved
// attribute structs of op_attrs.h: the one place that knows ONNX's attribute names,
// defaults and which inputs are shape-deciding. No protobuf types here, so kernels/ does
// not depend on libonnx.

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "kernels/op_attrs.h"
#include "kernels/op_kind.h"
#include "memory/dtype.h"

namespace ndserve::kernels {

// One ONNX attribute: AttributeProto's INT, FLOAT, INTS, FLOATS or STRING.
using AttrValue =
    std::variant<int64_t, float, std::vector<int64_t>, std::vector<float>, std::string>;
using AttrMap = absl::flat_hash_map<std::string, AttrValue>;

// The node input that ONNX passes as a tensor but kernels take in the attribute struct,
// or -1: Reshape's `shape` and the `axes` of Squeeze, Unsqueeze and ReduceSum (input 1 at
// opsets 13-17). Its value must be known when the model loads (an initializer or a
// Constant); it is not passed to the kernel.
int ShapeInputIndex(OpKind op);

// Builds the attribute struct for a node of `op` at default-domain `opset`. `shape_input`
// holds the INT64 values of the ShapeInputIndex input when the node has that input.
// Unknown attributes are ignored. Errors: UNIMPLEMENTED for an opset outside
// [kMinOpset, kMaxOpset] or an attribute value without a kernel (LayerNormalization
// stash_type other than 1); INVALID_ARGUMENT for a missing required attribute (Concat
// axis, Cast to) or one of the wrong type. Pure function; thread-safe.
absl::StatusOr<OpAttrs> BuildOpAttrs(OpKind op, int opset, const AttrMap& attrs,
                                     const std::optional<std::vector<int64_t>>& shape_input);

// ONNX TensorProto.DataType -> DType (FLOAT=1 -> kFp32, ...); INVALID_ARGUMENT for
// unknown codes, UNIMPLEMENTED for complex types.
absl::StatusOr<DType> DTypeFromOnnx(int64_t onnx_type);
// The inverse, for the types that have an ONNX code (everything but kBytes -> STRING=8).
int64_t DTypeToOnnx(DType dtype);

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_NODE_ATTRS_H_
