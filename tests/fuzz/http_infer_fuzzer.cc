// libFuzzer target: bytes -> an HTTP/REST infer body (JSON, or a JSON header and binary
// tensors with Inference-Header-Content-Length) -> ParseHttpInferRequest -> the decoding
// every binding shares (DecodeInferRequest) -> an echo of the decoded inputs as the
// response -> WriteHttpInferResponse; and the same body through OptionalBodyBool (the
// repository endpoints' bodies). Whatever the bytes: a Status, never a crash; errors are
// INVALID_ARGUMENT with a message; a reply's JSON part parses as JSON, and its binary
// part is no longer than the echoed inputs.
//
// Input layout: byte 0 bit 0 set: bytes 1-4 (little-endian) are the header length (taken
// modulo body size + 2, so that lengths past the end occur too) and the body follows;
// else the body is bytes 1 on. The seed corpus (tests/fuzz/corpus/http_infer) holds real
// requests in this layout, written by tests/fuzz/make_http_corpus.py.
//
// Build and run as infer_codec_fuzzer (tests/fuzz/CMakeLists.txt):
//   ninja -C build-fuzz http_infer_fuzzer && mkdir -p /tmp/corpus &&
//   build-fuzz/tests/fuzz/http_infer_fuzzer /tmp/corpus tests/fuzz/corpus/http_infer
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "rapidjson/document.h"
#include "server/infer_codec.h"
#include "server/json_codec.h"

namespace {

void Check(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "invariant violated: %s\n", what);
    std::abort();
  }
}

void CheckError(const absl::Status& status, const char* where) {
  if (status.code() != absl::StatusCode::kInvalidArgument) {
    std::fprintf(stderr, "%s: %s\n", where, status.ToString().c_str());
  }
  Check(status.code() == absl::StatusCode::kInvalidArgument, "error is not INVALID_ARGUMENT");
  Check(!status.message().empty(), "error without a message");
}

// JSON as the reply writer means it: NaN and Infinity are written as such
// (kWriteNanAndInfFlag in server/json_codec.cc), as Python's json module reads them.
bool IsJson(absl::string_view text) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseNanAndInfFlag>(text.data(),
                                                                            text.size());
  if (!doc.HasParseError() && doc.IsObject()) return true;
  std::fprintf(stderr, "not JSON at offset %zu: %.*s\n", doc.GetErrorOffset(),
               static_cast<int>(std::min<size_t>(text.size(), 2000)), text.data());
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::optional<size_t> json_bytes;
  size_t offset = 1;
  if ((data[0] & 1) != 0) {
    if (size < 5) return 0;
    const uint32_t n = static_cast<uint32_t>(data[1]) | static_cast<uint32_t>(data[2]) << 8 |
                       static_cast<uint32_t>(data[3]) << 16 | static_cast<uint32_t>(data[4]) << 24;
    offset = 5;
    json_bytes = n % (size - offset + 2);
  }
  const absl::string_view body(reinterpret_cast<const char*>(data) + offset, size - offset);

  // The repository endpoints read one optional boolean from the same kind of body.
  absl::StatusOr<std::optional<bool>> flag = ndserve::OptionalBodyBool(body, "ready");
  if (!flag.ok()) CheckError(flag.status(), "OptionalBodyBool");

  absl::StatusOr<ndserve::HttpInferRequest> parsed =
      ndserve::ParseHttpInferRequest(body, json_bytes, "m", "");
  if (!parsed.ok()) {
    CheckError(parsed.status(), "ParseHttpInferRequest");
    return 0;
  }
  Check(parsed->request.model_name() == "m", "model name from the URL");
  absl::StatusOr<ndserve::DecodedInferRequest> decoded =
      ndserve::DecodeInferRequest(parsed->request);
  if (!decoded.ok()) {
    CheckError(decoded.status(), "DecodeInferRequest");
    return 0;
  }
  // Echo the inputs as outputs, as a model computing the identity would.
  const ndserve::engine::InferenceRequest& request = decoded->request();
  ndserve::engine::InferenceResponse echo;
  echo.model_name = request.model_name;
  echo.id = request.id;
  size_t echoed_bytes = 0;
  for (const ndserve::engine::InferInputTensor& in : request.inputs) {
    ndserve::engine::InferOutputTensor& out = echo.outputs.emplace_back();
    out.name = in.name;
    out.dtype = in.dtype;
    out.shape = in.shape;
    out.data.assign(in.data.begin(), in.data.end());
    echoed_bytes += in.data.size();
  }
  inference::ModelInferResponse response;
  ndserve::EncodeInferResponse(echo, &response);
  absl::StatusOr<ndserve::HttpBody> reply = ndserve::WriteHttpInferResponse(response, *parsed);
  if (!reply.ok()) {
    // Only a BYTES output that is not UTF-8 and was asked for as JSON is refused.
    CheckError(reply.status(), "WriteHttpInferResponse");
    return 0;
  }
  if (reply->json_bytes.has_value()) {
    Check(*reply->json_bytes <= reply->body.size(), "header length past the reply");
    Check(IsJson(absl::string_view(reply->body).substr(0, *reply->json_bytes)),
          "reply header is not JSON");
    Check(reply->body.size() - *reply->json_bytes <= echoed_bytes, "binary part too long");
  } else {
    Check(IsJson(reply->body), "reply is not JSON");
  }
  return 0;
}
