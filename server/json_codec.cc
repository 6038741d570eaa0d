#include "server/json_codec.h"

#include <google/protobuf/util/json_util.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cast_convert.h"
#include "protocol/datatype.h"
#include "protocol/json_numbers.h"
#include "rapidjson/document.h"
#include "rapidjson/error/en.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace ndserve {
namespace {

static_assert(std::endian::native == std::endian::little, "the wire format is little-endian");

// Iterative parsing: a body of nested brackets must not recurse on the handler's stack.
constexpr unsigned kParseFlags = rapidjson::kParseIterativeFlag;
// Deeper `data` nesting than any tensor rank is refused before flattening recurses.
constexpr int kMaxDataDepth = 64;
constexpr size_t kBytesPrefix = 4;

using Writer = rapidjson::Writer<rapidjson::StringBuffer, rapidjson::UTF8<>, rapidjson::UTF8<>,
                                 rapidjson::CrtAllocator,
                                 rapidjson::kWriteValidateEncodingFlag |
                                     rapidjson::kWriteNanAndInfFlag>;

absl::Status Invalid(absl::string_view what, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", why));
}

absl::string_view JsonTypeName(const rapidjson::Value& v) {
  if (v.IsNull()) return "null";
  if (v.IsBool()) return "a boolean";
  if (v.IsNumber()) return "a number";
  if (v.IsString()) return "a string";
  if (v.IsArray()) return "an array";
  return "an object";
}

template <typename T>
void Put(std::string* out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out->append(bytes, sizeof(T));
}

template <typename T>
absl::Status PutInteger(const rapidjson::Value& v, absl::string_view what, std::string* out) {
  if (v.IsInt64()) {
    const int64_t x = v.GetInt64();
    if (std::in_range<T>(x)) {
      Put(out, static_cast<T>(x));
      return absl::OkStatus();
    }
  } else if (v.IsUint64()) {
    const uint64_t x = v.GetUint64();
    if (std::in_range<T>(x)) {
      Put(out, static_cast<T>(x));
      return absl::OkStatus();
    }
  } else {
    return Invalid(what, absl::StrCat("expected an integer, got ", JsonTypeName(v)));
  }
  return Invalid(what, "an integer value does not fit the datatype");
}

// Appends one JSON value as an element of `dtype` (an index into protocol::kDatatypes).
absl::Status PutElement(const rapidjson::Value& v, absl::string_view dtype, absl::string_view what,
                        std::string* out) {
  if (dtype == "BOOL") {
    if (!v.IsBool()) return Invalid(what, absl::StrCat("BOOL data must be true/false, got ", JsonTypeName(v)));
    Put<uint8_t>(out, v.GetBool() ? 1 : 0);
    return absl::OkStatus();
  }
  if (dtype == "FP32" || dtype == "FP64") {
    if (!v.IsNumber()) return Invalid(what, absl::StrCat("expected a number, got ", JsonTypeName(v)));
    if (dtype == "FP32") {
      Put(out, static_cast<float>(v.GetDouble()));
    } else {
      Put(out, v.GetDouble());
    }
    return absl::OkStatus();
  }
  if (dtype == "BYTES") {
    if (!v.IsString()) return Invalid(what, absl::StrCat("BYTES data must be strings, got ", JsonTypeName(v)));
    Put(out, static_cast<uint32_t>(v.GetStringLength()));
    out->append(v.GetString(), v.GetStringLength());
    return absl::OkStatus();
  }
  if (dtype == "INT8") return PutInteger<int8_t>(v, what, out);
  if (dtype == "INT16") return PutInteger<int16_t>(v, what, out);
  if (dtype == "INT32") return PutInteger<int32_t>(v, what, out);
  if (dtype == "INT64") return PutInteger<int64_t>(v, what, out);
  if (dtype == "UINT8") return PutInteger<uint8_t>(v, what, out);
  if (dtype == "UINT16") return PutInteger<uint16_t>(v, what, out);
  if (dtype == "UINT32") return PutInteger<uint32_t>(v, what, out);
  if (dtype == "UINT64") return PutInteger<uint64_t>(v, what, out);
  return Invalid(what, absl::StrCat(dtype, " data cannot be sent as JSON; send it as binary "
                                           "data (parameters.binary_data_size)"));
}

// Flattens nested `data` arrays row-major into raw little-endian bytes.
absl::Status FlattenData(const rapidjson::Value& v, absl::string_view dtype,
                         absl::string_view what, int depth, int64_t* count, std::string* out) {
  if (!v.IsArray()) {
    ++*count;
    return PutElement(v, dtype, absl::StrCat(what, " element ", *count - 1), out);
  }
  if (depth > kMaxDataDepth) return Invalid(what, "data is nested too deeply");
  for (const rapidjson::Value& e : v.GetArray()) {
    if (absl::Status s = FlattenData(e, dtype, what, depth + 1, count, out); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// A JSON object's members as InferParameters; `skip` is consumed by the HTTP binding.
absl::Status ReadParameters(const rapidjson::Value& params, absl::string_view what,
                            google::protobuf::Map<std::string, inference::InferParameter>* out,
                            absl::string_view skip) {
  if (!params.IsObject()) return Invalid(what, "parameters must be an object");
  for (const auto& m : params.GetObject()) {
    const std::string key(m.name.GetString(), m.name.GetStringLength());
    if (key == skip) continue;
    inference::InferParameter p;
    if (m.value.IsBool()) {
      p.set_bool_param(m.value.GetBool());
    } else if (m.value.IsInt64()) {
      p.set_int64_param(m.value.GetInt64());
    } else if (m.value.IsUint64()) {
      p.set_uint64_param(m.value.GetUint64());
    } else if (m.value.IsNumber()) {
      p.set_double_param(m.value.GetDouble());
    } else if (m.value.IsString()) {
      p.set_string_param(std::string(m.value.GetString(), m.value.GetStringLength()));
    } else {
      return Invalid(what, absl::StrCat("parameter '", key, "' must be a boolean, number or "
                                        "string, got ", JsonTypeName(m.value)));
    }
    (*out)[key] = std::move(p);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> StringMember(const rapidjson::Value& obj, const char* name,
                                         absl::string_view what, bool required) {
  auto it = obj.FindMember(name);
  if (it == obj.MemberEnd()) {
    if (required) return Invalid(what, absl::StrCat("'", name, "' is missing"));
    return std::string();
  }
  if (!it->value.IsString()) {
    return Invalid(what, absl::StrCat("'", name, "' must be a string, got ",
                                      JsonTypeName(it->value)));
  }
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

// An optional boolean parameter inside obj.parameters.
absl::StatusOr<std::optional<bool>> BoolParameter(const rapidjson::Value& obj, const char* name,
                                                  absl::string_view what) {
  auto params = obj.FindMember("parameters");
  if (params == obj.MemberEnd() || !params->value.IsObject()) return std::optional<bool>();
  auto it = params->value.FindMember(name);
  if (it == params->value.MemberEnd()) return std::optional<bool>();
  if (!it->value.IsBool()) return Invalid(what, absl::StrCat("parameter '", name, "' must be a boolean"));
  return std::optional<bool>(it->value.GetBool());
}

absl::Status ParseInput(const rapidjson::Value& in, int index, absl::string_view binary,
                        size_t* binary_pos, inference::ModelInferRequest* wire) {
  std::string what = absl::StrCat("input ", index);
  if (!in.IsObject()) return Invalid(what, "must be an object");
  absl::StatusOr<std::string> name = StringMember(in, "name", what, true);
  if (!name.ok()) return name.status();
  what = absl::StrCat("input '", *name, "'");
  absl::StatusOr<std::string> datatype = StringMember(in, "datatype", what, true);
  if (!datatype.ok()) return datatype.status();
  if (protocol::ElementSize(*datatype) < 0) {
    return Invalid(what, absl::StrCat("unknown datatype '", *datatype, "' (expected one of ",
                                      protocol::DatatypeList(), ")"));
  }
  auto shape = in.FindMember("shape");
  if (shape == in.MemberEnd() || !shape->value.IsArray()) {
    return Invalid(what, "'shape' must be an array of integers");
  }
  inference::ModelInferRequest::InferInputTensor* tensor = wire->add_inputs();
  tensor->set_name(*name);
  tensor->set_datatype(*datatype);
  for (const rapidjson::Value& d : shape->value.GetArray()) {
    if (!d.IsInt64()) return Invalid(what, "'shape' must be an array of integers");
    tensor->add_shape(d.GetInt64());
  }
  std::string* raw = wire->add_raw_input_contents();
  auto params = in.FindMember("parameters");
  if (params != in.MemberEnd()) {
    if (absl::Status s = ReadParameters(params->value, what, tensor->mutable_parameters(),
                                        "binary_data_size");
        !s.ok()) {
      return s;
    }
    auto size = params->value.FindMember("binary_data_size");
    if (size != params->value.MemberEnd()) {
      if (!size->value.IsUint64()) {
        return Invalid(what, "parameter 'binary_data_size' must be a non-negative integer");
      }
      const uint64_t n = size->value.GetUint64();
      if (n > binary.size() - *binary_pos) {
        return Invalid(what, absl::StrCat("binary_data_size ", n, " runs past the end of the "
                                          "binary data (", binary.size() - *binary_pos,
                                          " bytes left)"));
      }
      if (in.HasMember("data")) return Invalid(what, "both 'data' and binary_data_size given");
      raw->assign(binary.data() + *binary_pos, n);
      *binary_pos += n;
      return absl::OkStatus();
    }
  }
  auto data = in.FindMember("data");
  if (data == in.MemberEnd()) return Invalid(what, "'data' is missing (and no binary_data_size)");
  int64_t count = 0;
  if (absl::Status s = FlattenData(data->value, *datatype, what, 0, &count, raw); !s.ok()) return s;
  return absl::OkStatus();
}

template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Writes raw output bytes as a flat JSON array.
absl::Status WriteData(absl::string_view dtype, absl::string_view raw, absl::string_view name,
                       Writer* w) {
  w->StartArray();
  const int size = protocol::ElementSize(dtype);
  if (dtype == "BYTES") {
    size_t pos = 0;
    while (raw.size() - pos >= kBytesPrefix) {
      const uint32_t n = Load<uint32_t>(raw.data() + pos);
      pos += kBytesPrefix;
      if (n > raw.size() - pos) break;
      if (!w->String(raw.data() + pos, n)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "output '", name, "' holds BYTES that are not UTF-8; request it with "
                              "parameters.binary_data = true"));
      }
      pos += n;
    }
  } else if (dtype == "FP16" || dtype == "BF16") {
    for (size_t pos = 0; pos + sizeof(uint16_t) <= raw.size(); pos += sizeof(uint16_t)) {
      const uint16_t bits = Load<uint16_t>(raw.data() + pos);
      w->Double(dtype == "FP16" ? kernels::HalfToFloat(kernels::Half{bits})
                                : std::bit_cast<float>(static_cast<uint32_t>(bits) << 16));
    }
  } else if (size > 0) {
    protocol::WriteJsonNumbers(dtype, raw, w);
  }
  w->EndArray();
  return absl::OkStatus();
}

void WriteString(Writer* w, absl::string_view s) {
  // Names and ids were checked as UTF-8 by the decoder; anything else becomes "".
  if (!w->String(s.data(), static_cast<rapidjson::SizeType>(s.size()))) w->String("");
}

void WriteParameter(Writer* w, const inference::InferParameter& p) {
  switch (p.parameter_choice_case()) {
    case inference::InferParameter::kBoolParam:
      w->Bool(p.bool_param());
      break;
    case inference::InferParameter::kInt64Param:
      w->Int64(p.int64_param());
      break;
    case inference::InferParameter::kUint64Param:
      w->Uint64(p.uint64_param());
      break;
    case inference::InferParameter::kDoubleParam:
      w->Double(p.double_param());
      break;
    case inference::InferParameter::kStringParam:
      WriteString(w, p.string_param());
      break;
    default:
      w->Null();
  }
}

void WriteTensorMetadata(
    Writer* w,
    const google::protobuf::RepeatedPtrField<inference::ModelMetadataResponse::TensorMetadata>&
        tensors) {
  w->StartArray();
  for (const auto& t : tensors) {
    w->StartObject();
    w->Key("name");
    WriteString(w, t.name());
    w->Key("datatype");
    WriteString(w, t.datatype());
    w->Key("shape");
    w->StartArray();
    for (int64_t d : t.shape()) w->Int64(d);
    w->EndArray();
    w->EndObject();
  }
  w->EndArray();
}

}  // namespace

absl::StatusOr<HttpInferRequest> ParseHttpInferRequest(absl::string_view body,
                                                       std::optional<size_t> json_bytes,
                                                       absl::string_view model,
                                                       absl::string_view version) {
  if (json_bytes.has_value() && *json_bytes > body.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Inference-Header-Content-Length ", *json_bytes, " is larger than the body (",
        body.size(), " bytes)"));
  }
  const absl::string_view json = body.substr(0, json_bytes.value_or(body.size()));
  const absl::string_view binary = body.substr(json.size());
  rapidjson::Document doc;
  doc.Parse<kParseFlags>(json.data(), json.size());
  if (doc.HasParseError()) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed JSON at offset ", doc.GetErrorOffset(), ": ",
                     rapidjson::GetParseError_En(doc.GetParseError())));
  }
  if (!doc.IsObject()) return absl::InvalidArgumentError("the request body must be a JSON object");

  HttpInferRequest out;
  inference::ModelInferRequest& wire = out.request;
  wire.set_model_name(std::string(model));
  wire.set_model_version(std::string(version));
  absl::StatusOr<std::string> id = StringMember(doc, "id", "request", false);
  if (!id.ok()) return id.status();
  wire.set_id(*id);
  if (auto params = doc.FindMember("parameters"); params != doc.MemberEnd()) {
    if (absl::Status s = ReadParameters(params->value, "request", wire.mutable_parameters(),
                                        "binary_data_output");
        !s.ok()) {
      return s;
    }
    absl::StatusOr<std::optional<bool>> binary = BoolParameter(doc, "binary_data_output", "request");
    if (!binary.ok()) return binary.status();
    out.binary_by_default = binary->value_or(false);
  }
  auto inputs = doc.FindMember("inputs");
  if (inputs == doc.MemberEnd() || !inputs->value.IsArray()) {
    return absl::InvalidArgumentError("'inputs' must be an array of tensors");
  }
  size_t binary_pos = 0;
  int index = 0;
  for (const rapidjson::Value& in : inputs->value.GetArray()) {
    if (absl::Status s = ParseInput(in, index++, binary, &binary_pos, &wire); !s.ok()) return s;
  }
  if (binary_pos != binary.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the inputs' binary_data_size add up to ", binary_pos, " bytes, but ", binary.size(),
        " bytes follow the JSON header"));
  }
  if (auto outputs = doc.FindMember("outputs"); outputs != doc.MemberEnd()) {
    if (!outputs->value.IsArray()) return absl::InvalidArgumentError("'outputs' must be an array");
    int i = 0;
    for (const rapidjson::Value& o : outputs->value.GetArray()) {
      const std::string what = absl::StrCat("output ", i++);
      if (!o.IsObject()) return Invalid(what, "must be an object");
      absl::StatusOr<std::string> name = StringMember(o, "name", what, true);
      if (!name.ok()) return name.status();
      wire.add_outputs()->set_name(*name);
      absl::StatusOr<std::optional<bool>> binary = BoolParameter(o, "binary_data", what);
      if (!binary.ok()) return binary.status();
      if (binary->has_value()) out.binary_output[*name] = **binary;
    }
  }
  return out;
}

absl::StatusOr<HttpBody> WriteHttpInferResponse(const inference::ModelInferResponse& response,
                                                const HttpInferRequest& how) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  std::string binary;
  bool any_binary = false;
  w.StartObject();
  w.Key("model_name");
  WriteString(&w, response.model_name());
  w.Key("model_version");
  WriteString(&w, response.model_version());
  if (!response.id().empty()) {
    w.Key("id");
    WriteString(&w, response.id());
  }
  if (!response.parameters().empty()) {
    w.Key("parameters");
    w.StartObject();
    for (const auto& [key, value] : response.parameters()) {
      WriteString(&w, key);
      WriteParameter(&w, value);
    }
    w.EndObject();
  }
  w.Key("outputs");
  w.StartArray();
  for (int i = 0; i < response.outputs_size(); ++i) {
    const auto& t = response.outputs(i);
    // Both arms must be views: `cond ? const std::string& : ""` is a temporary std::string
    // copy, destroyed at the end of the statement, which left `raw` dangling.
    const absl::string_view raw = i < response.raw_output_contents_size()
                                      ? absl::string_view(response.raw_output_contents(i))
                                      : absl::string_view();
    bool as_binary = how.binary_by_default;
    if (auto it = how.binary_output.find(t.name()); it != how.binary_output.end()) {
      as_binary = it->second;
    }
    w.StartObject();
    w.Key("name");
    WriteString(&w, t.name());
    w.Key("datatype");
    WriteString(&w, t.datatype());
    w.Key("shape");
    w.StartArray();
    for (int64_t d : t.shape()) w.Int64(d);
    w.EndArray();
    if (as_binary) {
      any_binary = true;
      w.Key("parameters");
      w.StartObject();
      w.Key("binary_data_size");
      w.Uint64(raw.size());
      w.EndObject();
      binary.append(raw.data(), raw.size());
    } else {
      w.Key("data");
      if (absl::Status s = WriteData(t.datatype(), raw, t.name(), &w); !s.ok()) return s;
    }
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  HttpBody out;
  out.body.reserve(buffer.GetSize() + binary.size());
  out.body.assign(buffer.GetString(), buffer.GetSize());
  if (any_binary) {
    // The header length tells the client where the JSON ends and the tensors begin.
    out.json_bytes = out.body.size();
    out.body.append(binary);
  }
  return out;
}

std::string ErrorJson(absl::string_view message) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  w.Key("error");
  if (w.String(message.data(), static_cast<rapidjson::SizeType>(message.size()))) {
    w.EndObject();
    return std::string(buffer.GetString(), buffer.GetSize());
  }
  // Messages quote client text; keep the JSON valid whatever it held.
  return R"json({"error":"(the error message is not valid UTF-8)"})json";
}

int HttpStatusFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kDataLoss:
      return 500;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kAborted:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    default:
      return 400;
  }
}

std::string ServerMetadataJson(const inference::ServerMetadataResponse& metadata) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  w.Key("name");
  WriteString(&w, metadata.name());
  w.Key("version");
  WriteString(&w, metadata.version());
  w.Key("extensions");
  w.StartArray();
  for (const std::string& e : metadata.extensions()) WriteString(&w, e);
  w.EndArray();
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::string ModelMetadataJson(const inference::ModelMetadataResponse& metadata) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  w.Key("name");
  WriteString(&w, metadata.name());
  w.Key("versions");
  w.StartArray();
  for (const std::string& v : metadata.versions()) WriteString(&w, v);
  w.EndArray();
  w.Key("platform");
  WriteString(&w, metadata.platform());
  w.Key("inputs");
  WriteTensorMetadata(&w, metadata.inputs());
  w.Key("outputs");
  WriteTensorMetadata(&w, metadata.outputs());
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::string RepositoryIndexJson(const inference::RepositoryIndexResponse& index) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartArray();
  for (const auto& m : index.models()) {
    w.StartObject();
    w.Key("name");
    WriteString(&w, m.name());
    w.Key("version");
    WriteString(&w, m.version());
    w.Key("state");
    WriteString(&w, m.state());
    w.Key("reason");
    WriteString(&w, m.reason());
    w.EndObject();
  }
  w.EndArray();
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::string ProtoJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(message, &json, options).ok()) {
    return ErrorJson("cannot encode the response as JSON");
  }
  return json;
}

absl::StatusOr<std::optional<bool>> OptionalBodyBool(absl::string_view body, const char* member) {
  if (body.find_first_not_of(" \t\r\n") == absl::string_view::npos) return std::optional<bool>();
  rapidjson::Document doc;
  doc.Parse<kParseFlags>(body.data(), body.size());
  if (doc.HasParseError() || !doc.IsObject()) {
    return absl::InvalidArgumentError("the request body must be empty or a JSON object");
  }
  auto it = doc.FindMember(member);
  if (it == doc.MemberEnd()) return std::optional<bool>();
  if (!it->value.IsBool()) {
    return absl::InvalidArgumentError(absl::StrCat("'", member, "' must be a boolean"));
  }
  return std::optional<bool>(it->value.GetBool());
}

}  // namespace ndserve
