#include "loadtest/http_body.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "protocol/datatype.h"
#include "protocol/json_numbers.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace ndserve::loadtest {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// A tensor's raw little-endian bytes as a flat JSON array.
absl::Status WriteData(absl::string_view dtype, absl::string_view raw, absl::string_view name,
                       Writer* w) {
  const int size = protocol::ElementSize(dtype);
  if (size < 0 || dtype == "FP16" || dtype == "BF16") {
    return absl::InvalidArgumentError(absl::StrCat(
        "input '", name, "': ", dtype, " has no JSON form; use --http_format=binary"));
  }
  w->StartArray();
  if (size == 0) {
    size_t pos = 0;
    while (raw.size() - pos >= 4) {
      const uint32_t n = Load<uint32_t>(raw.data() + pos);
      pos += 4;
      if (n > raw.size() - pos) break;
      w->String(raw.data() + pos, n);
      pos += n;
    }
  } else {
    protocol::WriteJsonNumbers(dtype, raw, w);
  }
  w->EndArray();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<HttpInferBody> HttpInferBodyFor(const inference::ModelInferRequest& request,
                                               HttpFormat format) {
  const bool binary = format == HttpFormat::kBinary;
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  if (!request.id().empty()) {
    w.Key("id");
    w.String(request.id().data(), static_cast<rapidjson::SizeType>(request.id().size()));
  }
  if (binary) {
    w.Key("parameters");
    w.StartObject();
    w.Key("binary_data_output");
    w.Bool(true);
    w.EndObject();
  }
  w.Key("inputs");
  w.StartArray();
  std::string tensors;
  for (int i = 0; i < request.inputs_size(); ++i) {
    const auto& in = request.inputs(i);
    const std::string& raw =
        i < request.raw_input_contents_size() ? request.raw_input_contents(i) : std::string();
    w.StartObject();
    w.Key("name");
    w.String(in.name().data(), static_cast<rapidjson::SizeType>(in.name().size()));
    w.Key("datatype");
    w.String(in.datatype().data(), static_cast<rapidjson::SizeType>(in.datatype().size()));
    w.Key("shape");
    w.StartArray();
    for (int64_t d : in.shape()) w.Int64(d);
    w.EndArray();
    if (binary) {
      w.Key("parameters");
      w.StartObject();
      w.Key("binary_data_size");
      w.Uint64(raw.size());
      w.EndObject();
      tensors += raw;
    } else {
      w.Key("data");
      if (absl::Status s = WriteData(in.datatype(), raw, in.name(), &w); !s.ok()) return s;
    }
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  HttpInferBody out;
  out.body.assign(buffer.GetString(), buffer.GetSize());
  if (binary) {
    out.json_bytes = out.body.size();
    out.body += tensors;
  }
  return out;
}

std::string HttpModelPath(absl::string_view model, absl::string_view version) {
  return version.empty() ? absl::StrCat("/v2/models/", model)
                         : absl::StrCat("/v2/models/", model, "/versions/", version);
}

absl::StatusOr<std::vector<TensorSpec>> InputsFromHttpMetadata(absl::string_view json) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  auto bad = [] { return absl::InvalidArgumentError("model metadata: not KServe v2 JSON"); };
  if (doc.HasParseError() || !doc.IsObject()) return bad();
  auto inputs = doc.FindMember("inputs");
  if (inputs == doc.MemberEnd() || !inputs->value.IsArray()) return bad();
  std::vector<TensorSpec> specs;
  for (const rapidjson::Value& in : inputs->value.GetArray()) {
    if (!in.IsObject() || !in.HasMember("name") || !in["name"].IsString() ||
        !in.HasMember("datatype") || !in["datatype"].IsString() || !in.HasMember("shape") ||
        !in["shape"].IsArray()) {
      return bad();
    }
    TensorSpec& spec = specs.emplace_back();
    spec.name = in["name"].GetString();
    spec.datatype = in["datatype"].GetString();
    for (const rapidjson::Value& d : in["shape"].GetArray()) {
      if (!d.IsInt64()) return bad();
      spec.shape.push_back(d.GetInt64());
    }
  }
  return specs;
}

}  // namespace ndserve::loadtest
