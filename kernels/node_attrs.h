#ifndef NDSERVE_KERNELS_NODE_ATTRS_H_
#define NDSERVE_KERNELS_NODE_ATTRS_H_

// From ONNX node attributes (as the engine reads them out of a NodeProto) and host inputs
// to the resolved attribute structs of op_attrs.h. The per-op knowledge (attribute names,
// defaults, which opset changed what) lives in the rule files of kernels/rules/, reached
// through ops.def. No protobuf types here, so kernels/ does not depend on libonnx.

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kernels/op_attrs.h"
#include "kernels/op_kind.h"
#include "kernels/tensor_view.h"
#include "memory/dtype.h"

namespace ndserve::kernels {

// The value of a host input (ops.def HostInputs): a small tensor read on the host, from an
// initializer when the model loads or from the host-side shape arithmetic per request.
// Integer and BOOL elements are in `ints`, floating ones in `reals`. A plain value.
struct HostValue {
  DType dtype = DType::kInt64;
  Shape shape;
  std::vector<int64_t> ints;
  std::vector<double> reals;

  // From C-ordered little-endian element bytes (exactly numel * DTypeSize of them).
  // INVALID_ARGUMENT for a size mismatch, UNIMPLEMENTED for BYTES.
  static absl::StatusOr<HostValue> FromBytes(DType dtype, ShapeSpan shape,
                                             absl::Span<const uint8_t> bytes);
  static HostValue OfInts(std::vector<int64_t> values);  // 1-D INT64
  int64_t numel() const { return static_cast<int64_t>(IsReal() ? reals.size() : ints.size()); }
  bool IsReal() const;
};

// One ONNX attribute: AttributeProto's INT, FLOAT, INTS, FLOATS, STRING or TENSOR. A
// TENSOR attribute (ConstantOfShape's value, Constant's value) is held as a HostValue:
// such tensors are small and their values are read on the host, like host inputs.
using AttrValue = std::variant<int64_t, float, std::vector<int64_t>, std::vector<float>,
                               std::string, HostValue>;
using AttrMap = absl::flat_hash_map<std::string, AttrValue>;

// An INT attribute the engine adds to every node: how many outputs the node names. Rules
// of an op whose output count decides its result and is not otherwise stated (Split
// without its `split` input) read it. No ONNX attribute has this name.
inline constexpr char kNodeOutputCountAttr[] = "ndserve.num_outputs";

// The host values of one node, by input position. Positions that are not host inputs, or
// whose optional input the node leaves out, hold nothing. A plain value.
class HostInputs {
 public:
  HostInputs() = default;
  explicit HostInputs(std::vector<std::optional<HostValue>> values) : values_(std::move(values)) {}
  // Input `i`'s value, or null.
  const HostValue* Get(int i) const;
  // Input `i` as integers (nullopt when absent); INVALID_ARGUMENT naming `what` when it is
  // not an integer tensor of rank <= 1.
  absl::StatusOr<std::optional<std::vector<int64_t>>> Ints(OpKind op, int i,
                                                           absl::string_view what) const;
  // Input `i` as one real number (nullopt when absent); INVALID_ARGUMENT unless it holds
  // exactly one element.
  absl::StatusOr<std::optional<double>> Scalar(OpKind op, int i, absl::string_view what) const;

 private:
  std::vector<std::optional<HostValue>> values_;
};

// Builds the attribute struct for a node of `op` at default-domain `opset`. `host` holds
// the node's host inputs (GetOpInfo(op).host_inputs). Unknown attributes are ignored.
// Errors: UNIMPLEMENTED for an opset outside [since, kMaxOpset] or an attribute value
// without a kernel (LayerNormalization stash_type other than 1); INVALID_ARGUMENT for a
// missing required attribute or input (Concat axis, Cast to, Reshape shape) or one of the
// wrong type. Pure function; thread-safe.
absl::StatusOr<OpAttrs> BuildOpAttrs(OpKind op, int opset, const AttrMap& attrs,
                                     const HostInputs& host = {});

// ONNX TensorProto.DataType -> DType (FLOAT=1 -> kFp32, ...); INVALID_ARGUMENT for
// unknown codes, UNIMPLEMENTED for complex types.
absl::StatusOr<DType> DTypeFromOnnx(int64_t onnx_type);
// The inverse, for the types that have an ONNX code (everything but kBytes -> STRING=8).
int64_t DTypeToOnnx(DType dtype);

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_NODE_ATTRS_H_
