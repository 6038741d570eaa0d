#include "kernels/node_attrs.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "kernels/cast_convert.h"
#include "kernels/op_rules.h"

namespace ndserve::kernels {
namespace {

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

bool HostValue::IsReal() const {
  return dtype == DType::kFp16 || dtype == DType::kBf16 || dtype == DType::kFp32 ||
         dtype == DType::kFp64;
}

HostValue HostValue::OfInts(std::vector<int64_t> values) {
  HostValue v;
  v.dtype = DType::kInt64;
  v.shape = {static_cast<int64_t>(values.size())};
  v.ints = std::move(values);
  return v;
}

absl::StatusOr<HostValue> HostValue::FromBytes(DType dtype, ShapeSpan shape,
                                               absl::Span<const uint8_t> bytes) {
  if (!DTypeIsFixedSize(dtype)) {
    return absl::UnimplementedError("a host input of type BYTES is not supported");
  }
  NDS_RETURN_IF_ERROR(ValidateShape(shape, "host input"));
  const int64_t n = NumElements(shape);
  const std::size_t size = DTypeSize(dtype);
  if (bytes.size() != static_cast<std::size_t>(n) * size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "host input %s%s has %d bytes, expected %d", DTypeName(dtype), ShapeToString(shape),
        bytes.size(), static_cast<std::size_t>(n) * size));
  }
  HostValue v;
  v.dtype = dtype;
  v.shape.assign(shape.begin(), shape.end());
  const uint8_t* p = bytes.data();
  for (int64_t i = 0; i < n; ++i, p += size) {
    switch (dtype) {
      case DType::kBool:
      case DType::kUint8: v.ints.push_back(*p); break;
      case DType::kInt8: v.ints.push_back(Load<int8_t>(p)); break;
      case DType::kUint16: v.ints.push_back(Load<uint16_t>(p)); break;
      case DType::kInt16: v.ints.push_back(Load<int16_t>(p)); break;
      case DType::kUint32: v.ints.push_back(Load<uint32_t>(p)); break;
      case DType::kInt32: v.ints.push_back(Load<int32_t>(p)); break;
      // UINT64 past INT64_MAX wraps; no shape or axis value gets there.
      case DType::kUint64: v.ints.push_back(static_cast<int64_t>(Load<uint64_t>(p))); break;
      case DType::kInt64: v.ints.push_back(Load<int64_t>(p)); break;
      case DType::kFp16: v.reals.push_back(HalfToFloat(Half{Load<uint16_t>(p)})); break;
      case DType::kBf16: v.reals.push_back(BFloat16ToFloat(BFloat16{Load<uint16_t>(p)})); break;
      case DType::kFp32: v.reals.push_back(Load<float>(p)); break;
      case DType::kFp64: v.reals.push_back(Load<double>(p)); break;
      case DType::kBytes: break;
    }
  }
  return v;
}

const HostValue* HostInputs::Get(int i) const {
  if (i < 0 || i >= static_cast<int>(values_.size()) || !values_[i].has_value()) return nullptr;
  return &*values_[i];
}

absl::StatusOr<std::optional<std::vector<int64_t>>> HostInputs::Ints(
    OpKind op, int i, absl::string_view what) const {
  const HostValue* v = Get(i);
  if (v == nullptr) return std::optional<std::vector<int64_t>>();
  if (v->IsReal() || v->shape.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: input '%s' must be a 1-D integer tensor, not %s%s", OpKindName(op),
                        what, DTypeName(v->dtype), ShapeToString(v->shape)));
  }
  return std::optional<std::vector<int64_t>>(v->ints);
}

absl::StatusOr<std::optional<double>> HostInputs::Scalar(OpKind op, int i,
                                                         absl::string_view what) const {
  const HostValue* v = Get(i);
  if (v == nullptr) return std::optional<double>();
  if (v->numel() != 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: input '%s' must hold one element, not %s%s", OpKindName(op), what,
                        DTypeName(v->dtype), ShapeToString(v->shape)));
  }
  return std::optional<double>(v->IsReal() ? v->reals[0] : static_cast<double>(v->ints[0]));
}

absl::StatusOr<OpAttrs> BuildOpAttrs(OpKind op, int opset, const AttrMap& attrs,
                                     const HostInputs& host) {
  const OpInfo& info = GetOpInfo(op);
  if (opset < info.since_opset || opset > kMaxOpset) {
    return absl::UnimplementedError(
        absl::StrFormat("%s: opset %d is not supported (supported: %d to %d)", info.name, opset,
                        info.since_opset, kMaxOpset));
  }
  switch (op) {
#define NDS_OP(name, since, rules_fn, cpu, cuda, host_mask, flags) \
  case OpKind::k##name:                                           \
    return rules::Build##rules_fn(op, opset, attrs, host);
#include "kernels/ops.def"
#undef NDS_OP
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown op kind ", static_cast<int>(op)));
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
