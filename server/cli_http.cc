#include "server/cli_http.h"

#include <httplib.h>

#include <chrono>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "loadtest/http_body.h"
#include "rapidjson/document.h"

namespace ndserve::cli {
namespace {

constexpr char kHeaderLength[] = "Inference-Header-Content-Length";

std::unique_ptr<httplib::Client> Client(const std::string& address, absl::Duration timeout) {
  auto client = std::make_unique<httplib::Client>(absl::StrCat("http://", address));
  client->set_connection_timeout(absl::ToChronoMicroseconds(timeout));
  client->set_read_timeout(absl::ToChronoMicroseconds(timeout));
  client->set_write_timeout(absl::ToChronoMicroseconds(timeout));
  return client;
}

absl::StatusCode CodeFor(int http_status) {
  switch (http_status) {
    case 400:
    case 413:
    case 411:
      return absl::StatusCode::kInvalidArgument;
    case 401:
      return absl::StatusCode::kUnauthenticated;
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kNotFound;
    case 501:
      return absl::StatusCode::kUnimplemented;
    case 503:
      return absl::StatusCode::kUnavailable;
    case 504:
      return absl::StatusCode::kDeadlineExceeded;
    default:
      return absl::StatusCode::kInternal;
  }
}

// The {"error": "..."} of a failed reply, else its raw body.
std::string ErrorText(const std::string& body) {
  rapidjson::Document doc;
  doc.Parse(body.data(), body.size());
  if (!doc.HasParseError() && doc.IsObject() && doc.HasMember("error") && doc["error"].IsString()) {
    return doc["error"].GetString();
  }
  return body;
}

absl::Status BadReply(absl::string_view why) {
  return absl::InternalError(absl::StrCat("unexpected infer reply: ", why));
}

}  // namespace

absl::StatusOr<HttpReply> HttpGet(const std::string& address, const std::string& path,
                                  absl::Duration timeout) {
  httplib::Result reply = Client(address, timeout)->Get(path);
  if (!reply) {
    return absl::UnavailableError(absl::StrCat("GET http://", address, path, ": ",
                                               httplib::to_string(reply.error())));
  }
  return HttpReply{reply->status, reply->body};
}

absl::StatusOr<inference::ModelInferResponse> HttpInfer(
    const std::string& address, const inference::ModelInferRequest& request,
    absl::Duration timeout) {
  absl::StatusOr<loadtest::HttpInferBody> body =
      loadtest::HttpInferBodyFor(request, loadtest::HttpFormat::kBinary);
  if (!body.ok()) return body.status();
  const std::string path =
      absl::StrCat(loadtest::HttpModelPath(request.model_name(), request.model_version()),
                   "/infer");
  httplib::Headers headers{{kHeaderLength, std::to_string(body->json_bytes)}};
  httplib::Result reply =
      Client(address, timeout)->Post(path, headers, body->body, "application/octet-stream");
  if (!reply) {
    return absl::UnavailableError(absl::StrCat("POST http://", address, path, ": ",
                                               httplib::to_string(reply.error())));
  }
  if (reply->status != 200) {
    return absl::Status(CodeFor(reply->status),
                        absl::StrCat("HTTP ", reply->status, ": ", ErrorText(reply->body)));
  }
  size_t json_bytes = reply->body.size();
  if (reply->has_header(kHeaderLength) &&
      (!absl::SimpleAtoi(reply->get_header_value(kHeaderLength), &json_bytes) ||
       json_bytes > reply->body.size())) {
    return BadReply("bad Inference-Header-Content-Length");
  }
  rapidjson::Document doc;
  doc.Parse(reply->body.data(), json_bytes);
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("outputs") ||
      !doc["outputs"].IsArray()) {
    return BadReply("no outputs");
  }
  inference::ModelInferResponse response;
  if (doc.HasMember("model_name") && doc["model_name"].IsString()) {
    response.set_model_name(doc["model_name"].GetString());
  }
  if (doc.HasMember("model_version") && doc["model_version"].IsString()) {
    response.set_model_version(doc["model_version"].GetString());
  }
  size_t pos = json_bytes;
  for (const rapidjson::Value& o : doc["outputs"].GetArray()) {
    if (!o.IsObject() || !o.HasMember("name") || !o["name"].IsString() ||
        !o.HasMember("datatype") || !o["datatype"].IsString() || !o.HasMember("shape") ||
        !o["shape"].IsArray() || !o.HasMember("parameters") ||
        !o["parameters"].IsObject() || !o["parameters"].HasMember("binary_data_size") ||
        !o["parameters"]["binary_data_size"].IsUint64()) {
      return BadReply("an output without binary_data_size");
    }
    auto* out = response.add_outputs();
    out->set_name(o["name"].GetString());
    out->set_datatype(o["datatype"].GetString());
    for (const rapidjson::Value& d : o["shape"].GetArray()) {
      if (!d.IsInt64()) return BadReply("a shape that is not integers");
      out->add_shape(d.GetInt64());
    }
    const uint64_t n = o["parameters"]["binary_data_size"].GetUint64();
    if (n > reply->body.size() - pos) return BadReply("binary outputs past the body's end");
    response.add_raw_output_contents(reply->body.substr(pos, n));
    pos += n;
  }
  return response;
}

}  // namespace ndserve::cli
