#include "server/infer_codec.h"

#include <bit>
#include <charconv>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/text.h"
#include "engine/tensor_spec.h"
#include "protocol/datatype.h"
#include "protocol/dims.h"

namespace ndserve {
namespace {

// Typed contents are copied element by element into the engine's byte layout, and raw
// contents are passed through untouched; both are only right on a little-endian host.
static_assert(std::endian::native == std::endian::little, "the wire format is little-endian");

using inference::InferTensorContents;
using inference::ModelInferRequest;

constexpr size_t kBytesPrefix = 4;

uint32_t ReadLe32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// The `contents` fields that hold values, by name.
std::vector<absl::string_view> FilledFields(const InferTensorContents& c) {
  std::vector<absl::string_view> filled;
  if (c.bool_contents_size() > 0) filled.push_back("bool_contents");
  if (c.int_contents_size() > 0) filled.push_back("int_contents");
  if (c.int64_contents_size() > 0) filled.push_back("int64_contents");
  if (c.uint_contents_size() > 0) filled.push_back("uint_contents");
  if (c.uint64_contents_size() > 0) filled.push_back("uint64_contents");
  if (c.fp32_contents_size() > 0) filled.push_back("fp32_contents");
  if (c.fp64_contents_size() > 0) filled.push_back("fp64_contents");
  if (c.bytes_contents_size() > 0) filled.push_back("bytes_contents");
  return filled;
}

// The `contents` field KServe v2 assigns to a datatype; empty for FP16/BF16, which have
// no typed field and travel raw only.
absl::string_view FieldFor(DType dtype) {
  switch (dtype) {
    case DType::kBool:
      return "bool_contents";
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
      return "int_contents";
    case DType::kInt64:
      return "int64_contents";
    case DType::kUint8:
    case DType::kUint16:
    case DType::kUint32:
      return "uint_contents";
    case DType::kUint64:
      return "uint64_contents";
    case DType::kFp32:
      return "fp32_contents";
    case DType::kFp64:
      return "fp64_contents";
    case DType::kBytes:
      return "bytes_contents";
    case DType::kFp16:
    case DType::kBf16:
      return "";
  }
  return "";
}

std::string Describe(absl::Span<const int64_t> shape, DType dtype) {
  return absl::StrCat(engine::DimsToString(shape), " ", DTypeName(dtype));
}

// Narrows each wire value to Elem (range-checked for the 8/16-bit integer types, which
// share a 32-bit wire field) and appends its bytes to `out`.
template <typename Elem, typename Values>
absl::Status AppendValues(const Values& values, absl::string_view what, absl::string_view field,
                          DType dtype, std::vector<uint8_t>* out) {
  out->resize(static_cast<size_t>(values.size()) * sizeof(Elem));
  uint8_t* dst = out->data();
  for (int i = 0; i < values.size(); ++i) {
    const auto v = values.Get(i);
    if constexpr (std::is_integral_v<Elem> && !std::is_same_v<Elem, bool> &&
                  sizeof(Elem) < sizeof(v)) {
      if (!std::in_range<Elem>(v)) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": ", field, "[", i, "] = ", v, " does not fit ", DTypeName(dtype)));
      }
    }
    const Elem e = static_cast<Elem>(v);
    std::memcpy(dst + static_cast<size_t>(i) * sizeof(Elem), &e, sizeof(Elem));
  }
  return absl::OkStatus();
}

// Converts typed contents into the engine's layout, after checking that the values sit in
// the datatype's field and that there are as many as the shape has elements.
absl::Status ConvertTyped(const InferTensorContents& c, DType dtype, int64_t elements,
                          absl::Span<const int64_t> shape, absl::string_view what,
                          std::vector<uint8_t>* out) {
  const absl::string_view field = FieldFor(dtype);
  const std::vector<absl::string_view> filled = FilledFields(c);
  if (field.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", DTypeName(dtype),
                                                   " data must be sent in raw_input_contents "
                                                   "(KServe v2 has no typed field for it)"));
  }
  for (absl::string_view f : filled) {
    if (f != field) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", DTypeName(dtype), " data goes in ",
                                                     field, ", but ", f, " is set"));
    }
  }
  int64_t count = 0;
  switch (dtype) {
    case DType::kBool:
      count = c.bool_contents_size();
      break;
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
      count = c.int_contents_size();
      break;
    case DType::kInt64:
      count = c.int64_contents_size();
      break;
    case DType::kUint8:
    case DType::kUint16:
    case DType::kUint32:
      count = c.uint_contents_size();
      break;
    case DType::kUint64:
      count = c.uint64_contents_size();
      break;
    case DType::kFp32:
      count = c.fp32_contents_size();
      break;
    case DType::kFp64:
      count = c.fp64_contents_size();
      break;
    case DType::kBytes:
      count = c.bytes_contents_size();
      break;
    case DType::kFp16:
    case DType::kBf16:
      break;
  }
  if (count != elements) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": expected ", elements,
                                                   " values in contents.", field, " for shape ",
                                                   Describe(shape, dtype), ", got ", count));
  }
  switch (dtype) {
    case DType::kBool:
      return AppendValues<uint8_t>(c.bool_contents(), what, field, dtype, out);
    case DType::kInt8:
      return AppendValues<int8_t>(c.int_contents(), what, field, dtype, out);
    case DType::kInt16:
      return AppendValues<int16_t>(c.int_contents(), what, field, dtype, out);
    case DType::kInt32:
      return AppendValues<int32_t>(c.int_contents(), what, field, dtype, out);
    case DType::kInt64:
      return AppendValues<int64_t>(c.int64_contents(), what, field, dtype, out);
    case DType::kUint8:
      return AppendValues<uint8_t>(c.uint_contents(), what, field, dtype, out);
    case DType::kUint16:
      return AppendValues<uint16_t>(c.uint_contents(), what, field, dtype, out);
    case DType::kUint32:
      return AppendValues<uint32_t>(c.uint_contents(), what, field, dtype, out);
    case DType::kUint64:
      return AppendValues<uint64_t>(c.uint64_contents(), what, field, dtype, out);
    case DType::kFp32:
      return AppendValues<float>(c.fp32_contents(), what, field, dtype, out);
    case DType::kFp64:
      return AppendValues<double>(c.fp64_contents(), what, field, dtype, out);
    case DType::kBytes: {
      size_t total = 0;
      for (const std::string& s : c.bytes_contents()) {
        if (s.size() > std::numeric_limits<uint32_t>::max()) {
          return absl::InvalidArgumentError(
              absl::StrCat(what, ": a BYTES element is longer than 4 GiB"));
        }
        total += kBytesPrefix + s.size();
      }
      out->resize(total);
      uint8_t* dst = out->data();
      for (const std::string& s : c.bytes_contents()) {
        const uint32_t n = static_cast<uint32_t>(s.size());
        std::memcpy(dst, &n, kBytesPrefix);
        if (n > 0) std::memcpy(dst + kBytesPrefix, s.data(), n);
        dst += kBytesPrefix + n;
      }
      return absl::OkStatus();
    }
    case DType::kFp16:
    case DType::kBf16:
      break;
  }
  return absl::InternalError(absl::StrCat(what, ": unhandled datatype"));
}

// Checks raw bytes against shape x datatype.
absl::Status CheckRaw(absl::string_view raw, DType dtype, int64_t elements,
                      absl::Span<const int64_t> shape, absl::string_view what) {
  if (dtype == DType::kBytes) return ValidateBytesTensor(raw, elements, what);
  uint64_t expected = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(elements), DTypeSize(dtype), &expected)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": shape ", Describe(shape, dtype),
                                                   " is too large (byte size overflows)"));
  }
  if (raw.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": expected ", expected,
                                                   " bytes for shape ", Describe(shape, dtype),
                                                   ", got ", raw.size()));
  }
  return absl::OkStatus();
}

}  // namespace

size_t DecodedInferRequest::owned_bytes() const {
  size_t n = 0;
  for (const auto& buffer : owned_) n += buffer->size();
  return n;
}

absl::StatusOr<int64_t> ParseModelVersion(absl::string_view text) {
  if (text.empty()) return 0;
  int64_t version = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, version);
  if (ec != std::errc() || ptr != end || version < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model version '", text, "' is not a non-negative integer"));
  }
  return version;
}

absl::StatusOr<int64_t> CheckedElementCount(absl::Span<const int64_t> shape,
                                            absl::string_view what) {
  absl::StatusOr<int64_t> n = protocol::ElementCount(shape);
  if (!n.ok()) return absl::InvalidArgumentError(absl::StrCat(what, ": ", n.status().message()));
  return n;
}

absl::Status ValidateBytesTensor(absl::string_view data, int64_t elements, absl::string_view what) {
  size_t pos = 0;
  int64_t count = 0;
  while (pos < data.size()) {
    if (data.size() - pos < kBytesPrefix) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": BYTES element ", count,
                                                     " has a truncated length prefix (",
                                                     data.size() - pos, " bytes left)"));
    }
    const uint32_t len = ReadLe32(data.data() + pos);
    pos += kBytesPrefix;
    if (len > data.size() - pos) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": BYTES element ", count, " of ", len,
                                                     " bytes runs past the end of the data (",
                                                     data.size() - pos, " bytes left)"));
    }
    pos += len;
    ++count;
  }
  if (count != elements) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": BYTES data holds ", count, " elements, the shape needs ", elements));
  }
  return absl::OkStatus();
}

absl::StatusOr<DecodedInferRequest> DecodeInferRequest(const ModelInferRequest& wire) {
  DecodedInferRequest decoded;
  engine::InferenceRequest& out = decoded.request_;
  // Names first: every later message quotes them, and none may be long or binary.
  if (absl::Status s = CheckName("model name", wire.model_name()); !s.ok()) return s;
  if (absl::Status s = CheckName("request id", wire.id()); !s.ok()) return s;
  for (const ModelInferRequest::InferInputTensor& in : wire.inputs()) {
    if (absl::Status s = CheckName("input name", in.name()); !s.ok()) return s;
  }
  for (const ModelInferRequest::InferRequestedOutputTensor& o : wire.outputs()) {
    if (absl::Status s = CheckName("requested output name", o.name()); !s.ok()) return s;
  }
  out.model_name = wire.model_name();
  absl::StatusOr<int64_t> version = ParseModelVersion(wire.model_version());
  if (!version.ok()) return version.status();
  out.model_version = *version;
  out.id = wire.id();

  const int num_inputs = wire.inputs_size();
  if (num_inputs == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("request for model '", wire.model_name(), "' has no inputs"));
  }
  const bool raw = wire.raw_input_contents_size() > 0;
  if (raw && wire.raw_input_contents_size() != num_inputs) {
    const int missing = std::min(num_inputs, wire.raw_input_contents_size());
    const std::string first_unmatched =
        missing < num_inputs ? absl::StrCat("input '", wire.inputs(missing).name(), "' has none; ")
                             : "";
    return absl::InvalidArgumentError(
        absl::StrCat(first_unmatched, "expected one raw_input_contents per input (", num_inputs,
                     " inputs), got ", wire.raw_input_contents_size()));
  }

  out.inputs.reserve(num_inputs);
  for (int i = 0; i < num_inputs; ++i) {
    const ModelInferRequest::InferInputTensor& in = wire.inputs(i);
    const std::string what = absl::StrCat("input '", in.name(), "'");
    if (in.name().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("input ", i, " has no name"));
    }
    const std::optional<DType> dtype = WireDType(in.datatype());
    if (!dtype.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": unknown datatype '", in.datatype(),
                                                     "' (expected one of ",
                                                     protocol::DatatypeList(), ")"));
    }
    const absl::Span<const int64_t> shape(in.shape().data(), in.shape_size());
    absl::StatusOr<int64_t> elements = CheckedElementCount(shape, what);
    if (!elements.ok()) return elements.status();

    engine::InferInputTensor& tensor = out.inputs.emplace_back();
    tensor.name = in.name();
    tensor.dtype = *dtype;
    tensor.shape.assign(shape.begin(), shape.end());
    if (raw) {
      if (in.has_contents() && !FilledFields(in.contents()).empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": both raw_input_contents and typed contents given; use one or the other"));
      }
      const std::string& bytes = wire.raw_input_contents(i);
      if (absl::Status s = CheckRaw(bytes, *dtype, *elements, shape, what); !s.ok()) return s;
      tensor.data =
          absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    } else {
      auto buffer = std::make_unique<std::vector<uint8_t>>();
      if (absl::Status s =
              ConvertTyped(in.contents(), *dtype, *elements, shape, what, buffer.get());
          !s.ok()) {
        return s;
      }
      tensor.data = absl::Span<const uint8_t>(buffer->data(), buffer->size());
      decoded.owned_.push_back(std::move(buffer));
    }
  }

  out.requested_outputs.reserve(wire.outputs_size());
  for (int i = 0; i < wire.outputs_size(); ++i) {
    const std::string& name = wire.outputs(i).name();
    if (name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("requested output ", i, " has no name"));
    }
    out.requested_outputs.push_back(name);
  }
  return decoded;
}

size_t EncodedResponseBytes(const engine::InferenceResponse& response) {
  // Per field: a tag and a length prefix (at most 1 + 10 bytes), generously rounded up.
  constexpr size_t kFieldOverhead = 16;
  size_t bytes = response.model_name.size() + response.id.size() + 3 * kFieldOverhead;
  for (const engine::InferOutputTensor& t : response.outputs) {
    bytes += t.name.size() + DTypeName(t.dtype).size() + t.data.size() +
             t.shape.size() * kFieldOverhead + 4 * kFieldOverhead;
  }
  return bytes;
}

void EncodeInferResponse(const engine::InferenceResponse& response,
                         inference::ModelInferResponse* wire) {
  wire->Clear();
  wire->set_model_name(response.model_name);
  wire->set_model_version(absl::StrCat(response.model_version));
  wire->set_id(response.id);
  for (const engine::InferOutputTensor& t : response.outputs) {
    inference::ModelInferResponse::InferOutputTensor* out = wire->add_outputs();
    out->set_name(t.name);
    out->set_datatype(std::string(DTypeName(t.dtype)));
    out->mutable_shape()->Add(t.shape.begin(), t.shape.end());
    wire->add_raw_output_contents(reinterpret_cast<const char*>(t.data.data()), t.data.size());
  }
}

}  // namespace ndserve
