#include "engine/onnx_convert.h"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace ndserve::engine {
namespace {

// Copies `n` typed values (as ONNX stores them) into `out` as `dtype`'s bytes.
template <typename Src>
void Narrow(const google::protobuf::RepeatedField<Src>& src, DType dtype, std::string* out) {
  const size_t size = DTypeSize(dtype);
  out->resize(src.size() * size);
  for (int i = 0; i < src.size(); ++i) {
    // Little-endian: the low `size` bytes of each value are the element (FP16/BF16 bit
    // patterns and small integers are stored widened to int32 / uint64).
    const Src v = src.Get(i);
    std::memcpy(out->data() + i * size, &v, size);
  }
}

}  // namespace

absl::Status Prefixed(const absl::Status& status, absl::string_view prefix) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(prefix, ": ", status.message()));
}

bool IsDefaultDomain(absl::string_view domain) { return domain.empty() || domain == "ai.onnx"; }

absl::StatusOr<TensorSpec> ToTensorSpec(const onnx::ValueInfoProto& vi, absl::string_view kind) {
  TensorSpec spec;
  spec.name = vi.name();
  if (!vi.type().has_tensor_type()) {
    return absl::UnimplementedError(absl::StrCat(kind, " '", vi.name(),
                                                 "' is not a tensor (sequences and maps are not "
                                                 "supported)"));
  }
  const onnx::TypeProto::Tensor& tt = vi.type().tensor_type();
  absl::StatusOr<DType> dtype = kernels::DTypeFromOnnx(tt.elem_type());
  if (!dtype.ok()) return Prefixed(dtype.status(), absl::StrCat(kind, " '", vi.name(), "'"));
  spec.dtype = *dtype;
  if (!tt.has_shape()) {
    spec.any_rank = true;
    return spec;
  }
  for (const onnx::TensorShapeProto::Dimension& d : tt.shape().dim()) {
    spec.dims.push_back(d.has_dim_value() && d.dim_value() >= 0 ? d.dim_value() : kAnyDim);
  }
  return spec;
}

absl::Status ConvertInitializer(onnx::TensorProto& t, Initializer* out, absl::string_view what) {
  const std::string where =
      what.empty() ? absl::StrCat("initializer '", t.name(), "'") : std::string(what);
  out->name = t.name();
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    return absl::UnimplementedError(absl::StrCat(where, ": external data files are not supported"));
  }
  if (t.has_segment()) {
    return absl::UnimplementedError(absl::StrCat(where, ": segmented tensors are not supported"));
  }
  absl::StatusOr<DType> dtype = kernels::DTypeFromOnnx(t.data_type());
  if (!dtype.ok()) return Prefixed(dtype.status(), where);
  if (*dtype == DType::kBytes) {
    return absl::UnimplementedError(absl::StrCat(where, ": STRING tensors are not supported"));
  }
  out->dtype = *dtype;
  out->shape.assign(t.dims().begin(), t.dims().end());
  NDS_RETURN_IF_ERROR(kernels::ValidateShape(out->shape, where));
  const int64_t numel = kernels::NumElements(out->shape);
  uint64_t expected = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(numel), DTypeSize(out->dtype), &expected)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": too many elements"));
  }
  const std::string desc = absl::StrCat(DTypeName(out->dtype), kernels::ShapeToString(out->shape));
  if (t.has_raw_data()) {
    if (t.raw_data().size() != expected) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s has %d bytes of data, but %s needs %d", where, t.raw_data().size(), desc, expected));
    }
    out->bytes = std::move(*t.mutable_raw_data());
    return absl::OkStatus();
  }
  int64_t count = 0;
  switch (out->dtype) {
    case DType::kFp32:
      count = t.float_data_size();
      if (count == numel) {
        out->bytes.assign(reinterpret_cast<const char*>(t.float_data().data()), expected);
      }
      break;
    case DType::kFp64:
      count = t.double_data_size();
      if (count == numel) {
        out->bytes.assign(reinterpret_cast<const char*>(t.double_data().data()), expected);
      }
      break;
    case DType::kInt64:
      count = t.int64_data_size();
      if (count == numel) {
        out->bytes.assign(reinterpret_cast<const char*>(t.int64_data().data()), expected);
      }
      break;
    case DType::kUint32:
    case DType::kUint64:
      count = t.uint64_data_size();
      if (count == numel) Narrow(t.uint64_data(), out->dtype, &out->bytes);
      break;
    default:  // INT32, INT16, INT8, UINT16, UINT8, BOOL, FP16, BF16 live in int32_data.
      count = t.int32_data_size();
      if (count == numel) Narrow(t.int32_data(), out->dtype, &out->bytes);
      break;
  }
  if (count != numel) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s has %d values, but %s needs %d", where, count, desc, numel));
  }
  return absl::OkStatus();
}

absl::StatusOr<kernels::AttrValue> ConvertAttribute(const onnx::AttributeProto& a) {
  using AP = onnx::AttributeProto;
  AP::AttributeType type = a.type();
  if (type == AP::UNDEFINED) {  // very old writers leave `type` unset; infer it
    if (a.has_f()) type = AP::FLOAT;
    if (a.has_i()) type = AP::INT;
    if (a.has_s()) type = AP::STRING;
    if (a.floats_size() > 0) type = AP::FLOATS;
    if (a.ints_size() > 0) type = AP::INTS;
    if (a.has_t()) type = AP::TENSOR;
  }
  switch (type) {
    case AP::INT:
      return kernels::AttrValue(static_cast<int64_t>(a.i()));
    case AP::FLOAT:
      return kernels::AttrValue(a.f());
    case AP::STRING:
      return kernels::AttrValue(a.s());
    case AP::INTS:
      return kernels::AttrValue(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    case AP::FLOATS:
      return kernels::AttrValue(std::vector<float>(a.floats().begin(), a.floats().end()));
    case AP::TENSOR: {
      // Attribute tensors are small (ConstantOfShape's one element, a Constant's value);
      // the copy lets the initializer path take raw_data by move.
      onnx::TensorProto t = a.t();
      Initializer init;
      NDS_RETURN_IF_ERROR(
          ConvertInitializer(t, &init, absl::StrCat("tensor attribute '", a.name(), "'")));
      NDS_ASSIGN_OR_RETURN(
          kernels::HostValue v,
          kernels::HostValue::FromBytes(
              init.dtype, init.shape,
              absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(init.bytes.data()),
                                  init.bytes.size())));
      return kernels::AttrValue(std::move(v));
    }
    case AP::STRINGS: {
      // Lists of names (the recurrent ops' activations, which PyTorch always writes for
      // RNN) arrive as one STRING of the items joined by ','; the rules that read one
      // split it (kernels/rules/rnn.cc).
      std::string joined;
      for (const std::string& s : a.strings()) {
        if (!joined.empty()) joined += ',';
        joined += s;
      }
      return kernels::AttrValue(std::move(joined));
    }
    default:
      return absl::UnimplementedError(
          absl::StrFormat("attribute '%s' has type %s, which is not supported", a.name(),
                          AP::AttributeType_Name(type)));
  }
}

absl::Status ConstantToInitializer(onnx::NodeProto& n, Initializer* out) {
  const std::string where = absl::StrCat("node '", n.name(), "' (Constant)");
  if (n.output_size() != 1 || n.output(0).empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": a Constant has exactly one output"));
  }
  if (n.attribute_size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: a Constant has exactly one value attribute, this one has %d", where,
                        n.attribute_size()));
  }
  onnx::AttributeProto& a = *n.mutable_attribute(0);
  const std::string& kind = a.name();
  out->name = n.output(0);
  if (kind == "value") {
    if (!a.has_t()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": attribute 'value' is not a tensor"));
    }
    // The converter names the tensor in its errors; Constants' tensors are often unnamed.
    a.mutable_t()->set_name(out->name);
    NDS_RETURN_IF_ERROR(Prefixed(ConvertInitializer(*a.mutable_t(), out), where));
    out->name = n.output(0);
    return absl::OkStatus();
  }
  auto set = [&](DType dtype, kernels::Shape shape, const void* data, size_t bytes) {
    out->dtype = dtype;
    out->shape = std::move(shape);
    out->bytes.assign(static_cast<const char*>(data), bytes);
  };
  if (kind == "value_float") {
    const float v = a.f();
    set(DType::kFp32, {}, &v, sizeof(v));
  } else if (kind == "value_int") {
    const int64_t v = a.i();
    set(DType::kInt64, {}, &v, sizeof(v));
  } else if (kind == "value_floats") {
    set(DType::kFp32, {a.floats_size()}, a.floats().data(), a.floats_size() * sizeof(float));
  } else if (kind == "value_ints") {
    set(DType::kInt64, {a.ints_size()}, a.ints().data(), a.ints_size() * sizeof(int64_t));
  } else if (kind == "sparse_value" || kind == "value_string" || kind == "value_strings") {
    return absl::UnimplementedError(absl::StrCat(
        where, ": attribute '", kind, "' is not supported (",
        kind == "sparse_value" ? "sparse tensors" : "STRING tensors", " cannot be served)"));
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": unknown value attribute '", kind, "'"));
  }
  return absl::OkStatus();
}

}  // namespace ndserve::engine
