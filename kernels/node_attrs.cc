#include "kernels/node_attrs.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace ndserve::kernels {
namespace {

template <typename T>
absl::StatusOr<std::optional<T>> Find(OpKind op, const AttrMap& attrs, absl::string_view name) {
  auto it = attrs.find(name);
  if (it == attrs.end()) return std::optional<T>();
  if (const T* v = std::get_if<T>(&it->second)) return std::optional<T>(*v);
  // ONNX writers sometimes store an integral float attribute as INT; accept it.
  if constexpr (std::is_same_v<T, float>) {
    if (const int64_t* v = std::get_if<int64_t>(&it->second)) {
      return std::optional<T>(static_cast<float>(*v));
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat(OpKindName(op), ": attribute '", name, "' has the wrong type"));
}

template <typename T>
absl::StatusOr<T> Get(OpKind op, const AttrMap& attrs, absl::string_view name, T fallback) {
  NDS_ASSIGN_OR_RETURN(std::optional<T> v, Find<T>(op, attrs, name));
  return v.has_value() ? *std::move(v) : std::move(fallback);
}

template <typename T>
absl::StatusOr<T> Require(OpKind op, const AttrMap& attrs, absl::string_view name) {
  NDS_ASSIGN_OR_RETURN(std::optional<T> v, Find<T>(op, attrs, name));
  if (!v.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(OpKindName(op), ": required attribute '", name, "' is missing"));
  }
  return *std::move(v);
}

absl::StatusOr<bool> GetBool(OpKind op, const AttrMap& attrs, absl::string_view name,
                             bool fallback) {
  NDS_ASSIGN_OR_RETURN(int64_t v, Get<int64_t>(op, attrs, name, fallback ? 1 : 0));
  return v != 0;
}

}  // namespace

int ShapeInputIndex(OpKind op) {
  switch (op) {
    case OpKind::kReshape:
    case OpKind::kSqueeze:
    case OpKind::kUnsqueeze:
    case OpKind::kReduceSum:
      return 1;
    default:
      return -1;
  }
}

absl::StatusOr<OpAttrs> BuildOpAttrs(OpKind op, int opset, const AttrMap& attrs,
                                     const std::optional<std::vector<int64_t>>& shape_input) {
  if (opset < kMinOpset || opset > kMaxOpset) {
    return absl::UnimplementedError(
        absl::StrFormat("%s: opset %d is not supported (supported: %d to %d)", OpKindName(op),
                        opset, kMinOpset, kMaxOpset));
  }
  const std::vector<int64_t> shape_values = shape_input.value_or(std::vector<int64_t>());
  switch (op) {
    case OpKind::kGemm: {
      GemmAttrs a;
      NDS_ASSIGN_OR_RETURN(a.alpha, Get<float>(op, attrs, "alpha", 1.0f));
      NDS_ASSIGN_OR_RETURN(a.beta, Get<float>(op, attrs, "beta", 1.0f));
      NDS_ASSIGN_OR_RETURN(a.trans_a, GetBool(op, attrs, "transA", false));
      NDS_ASSIGN_OR_RETURN(a.trans_b, GetBool(op, attrs, "transB", false));
      return a;
    }
    case OpKind::kSoftmax: {
      SoftmaxAttrs a;
      NDS_ASSIGN_OR_RETURN(a.axis, Get<int64_t>(op, attrs, "axis", -1));
      return a;
    }
    case OpKind::kLayerNormalization: {
      LayerNormAttrs a;
      NDS_ASSIGN_OR_RETURN(a.axis, Get<int64_t>(op, attrs, "axis", -1));
      NDS_ASSIGN_OR_RETURN(a.epsilon, Get<float>(op, attrs, "epsilon", 1e-5f));
      NDS_ASSIGN_OR_RETURN(int64_t stash, Get<int64_t>(op, attrs, "stash_type", 1));
      if (stash != 1) {
        return absl::UnimplementedError(absl::StrFormat(
            "LayerNormalization: stash_type %d is not supported (only 1, FP32)", stash));
      }
      return a;
    }
    case OpKind::kGather: {
      GatherAttrs a;
      NDS_ASSIGN_OR_RETURN(a.axis, Get<int64_t>(op, attrs, "axis", 0));
      return a;
    }
    case OpKind::kReduceSum:
    case OpKind::kReduceMean: {
      ReduceAttrs a;
      NDS_ASSIGN_OR_RETURN(a.keepdims, GetBool(op, attrs, "keepdims", true));
      if (op == OpKind::kReduceSum) {
        // Opset 13 moved ReduceSum's axes into an optional input.
        a.axes = shape_values;
        NDS_ASSIGN_OR_RETURN(a.noop_with_empty_axes,
                             GetBool(op, attrs, "noop_with_empty_axes", false));
      } else {
        // ReduceMean keeps axes as an attribute until opset 18.
        NDS_ASSIGN_OR_RETURN(a.axes, Get<std::vector<int64_t>>(op, attrs, "axes", {}));
      }
      return a;
    }
    case OpKind::kConcat: {
      ConcatAttrs a;
      NDS_ASSIGN_OR_RETURN(a.axis, Require<int64_t>(op, attrs, "axis"));
      return a;
    }
    case OpKind::kReshape: {
      if (!shape_input.has_value()) {
        return absl::InvalidArgumentError("Reshape: the shape input is missing");
      }
      ReshapeAttrs a;
      a.shape = shape_values;
      NDS_ASSIGN_OR_RETURN(a.allowzero, GetBool(op, attrs, "allowzero", false));
      return a;
    }
    case OpKind::kFlatten: {
      FlattenAttrs a;
      NDS_ASSIGN_OR_RETURN(a.axis, Get<int64_t>(op, attrs, "axis", 1));
      return a;
    }
    case OpKind::kTranspose: {
      TransposeAttrs a;
      NDS_ASSIGN_OR_RETURN(a.perm, Get<std::vector<int64_t>>(op, attrs, "perm", {}));
      return a;
    }
    case OpKind::kSqueeze:
      return SqueezeAttrs{shape_values};
    case OpKind::kUnsqueeze:
      if (!shape_input.has_value()) {
        return absl::InvalidArgumentError("Unsqueeze: the axes input is missing");
      }
      return UnsqueezeAttrs{shape_values};
    case OpKind::kCast: {
      NDS_ASSIGN_OR_RETURN(int64_t to, Require<int64_t>(op, attrs, "to"));
      NDS_ASSIGN_OR_RETURN(DType dtype, DTypeFromOnnx(to));
      return CastAttrs{dtype};
    }
    default:
      return NoAttrs{};
  }
}

absl::StatusOr<DType> DTypeFromOnnx(int64_t onnx_type) {
  switch (onnx_type) {
    case 1:
      return DType::kFp32;
    case 2:
      return DType::kUint8;
    case 3:
      return DType::kInt8;
    case 4:
      return DType::kUint16;
    case 5:
      return DType::kInt16;
    case 6:
      return DType::kInt32;
    case 7:
      return DType::kInt64;
    case 8:
      return DType::kBytes;
    case 9:
      return DType::kBool;
    case 10:
      return DType::kFp16;
    case 11:
      return DType::kFp64;
    case 12:
      return DType::kUint32;
    case 13:
      return DType::kUint64;
    case 16:
      return DType::kBf16;
    case 14:
    case 15:
      return absl::UnimplementedError(
          absl::StrFormat("ONNX element type %d (complex) is not supported", onnx_type));
    default:
      return absl::InvalidArgumentError(absl::StrFormat("unknown ONNX element type %d", onnx_type));
  }
}

int64_t DTypeToOnnx(DType dtype) {
  switch (dtype) {
    case DType::kFp32:
      return 1;
    case DType::kUint8:
      return 2;
    case DType::kInt8:
      return 3;
    case DType::kUint16:
      return 4;
    case DType::kInt16:
      return 5;
    case DType::kInt32:
      return 6;
    case DType::kInt64:
      return 7;
    case DType::kBytes:
      return 8;
    case DType::kBool:
      return 9;
    case DType::kFp16:
      return 10;
    case DType::kFp64:
      return 11;
    case DType::kUint32:
      return 12;
    case DType::kUint64:
      return 13;
    case DType::kBf16:
      return 16;
  }
  return 0;
}

}  // namespace ndserve::kernels
