#ifndef NDSERVE_SERVER_JSON_CODEC_H_
#define NDSERVE_SERVER_JSON_CODEC_H_

// The KServe v2 HTTP/REST binding's bodies <-> the gRPC messages. An HTTP infer request
// becomes the same inference::ModelInferRequest a gRPC client sends, so both bindings go
// through one decoder and validator (server/infer_codec.h) and one core
// (InferenceServiceImpl::ModelInfer); this file only translates JSON and the binary
// tensor data extension. Pure functions, unit tested in
// tests/unit/server/json_codec_test.cc. docs/design.md §5.1.

#include <cstddef>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/inference.pb.h"

namespace ndserve {

// An HTTP infer request translated: the wire request plus how each output is to be sent
// back (JSON `data` or binary after the JSON header).
struct HttpInferRequest {
  inference::ModelInferRequest request;
  // The request's "binary_data_output" parameter: outputs not named in `outputs` (or
  // named without their own "binary_data") are sent binary.
  bool binary_by_default = false;
  // Per requested output, its "binary_data" parameter.
  absl::flat_hash_map<std::string, bool> binary_output;
};

// `body` is the whole request body; `json_bytes` the Inference-Header-Content-Length
// header (nullopt when absent: the body is all JSON). The JSON says each input's name,
// datatype and shape, and either `data` (row-major, nested or flat; numbers for the
// numeric types, true/false for BOOL, strings for BYTES; FP16/BF16 only as binary) or
// parameters.binary_data_size, the input's bytes in the binary part in input order.
// `model` and `version` come from the URL. INVALID_ARGUMENT names the problem: malformed
// JSON, a header length past the body, missing or mistyped fields, a value that does not
// fit its datatype, binary sizes that do not add up to the binary part. Element counts
// and byte sizes against the shape are DecodeInferRequest's to check.
absl::StatusOr<HttpInferRequest> ParseHttpInferRequest(absl::string_view body,
                                                       std::optional<size_t> json_bytes,
                                                       absl::string_view model,
                                                       absl::string_view version);

// A response body and, when some output is binary, the length of its JSON part (the
// Inference-Header-Content-Length to send).
struct HttpBody {
  std::string body;
  std::optional<size_t> json_bytes;
};

// ModelInferResponse (raw_output_contents) -> JSON with `data` arrays, or binary outputs
// after the JSON as `how` asks. INVALID_ARGUMENT for a BYTES output that is not UTF-8
// and was asked for as JSON (it must be requested with binary_data).
absl::StatusOr<HttpBody> WriteHttpInferResponse(const inference::ModelInferResponse& response,
                                                const HttpInferRequest& how);

// {"error": "<message>"}.
std::string ErrorJson(absl::string_view message);

// The HTTP status for a status code, as Triton's HTTP endpoint maps its errors:
// INVALID_ARGUMENT and other client errors 400, NOT_FOUND 404, UNIMPLEMENTED 501,
// INTERNAL 500, UNAVAILABLE 503. Triton has no RESOURCE_EXHAUSTED; ndserve's (a memory or
// host-byte budget, a full queue) is transient like UNAVAILABLE and gets 503 too, which
// clients already retry; DEADLINE_EXCEEDED 504; UNAUTHENTICATED 401; PERMISSION_DENIED 403.
int HttpStatusFor(absl::StatusCode code);

// Metadata and repository messages as the KServe v2 REST binding spells them (numbers
// as numbers, not protobuf JSON's strings).
std::string ServerMetadataJson(const inference::ServerMetadataResponse& metadata);
std::string ModelMetadataJson(const inference::ModelMetadataResponse& metadata);
// A JSON array of {name, version, state, reason}.
std::string RepositoryIndexJson(const inference::RepositoryIndexResponse& index);
// Protobuf's JSON mapping of any message with proto field names (config and statistics,
// as Triton returns them).
std::string ProtoJson(const google::protobuf::Message& message);

// An optional request body (repository index, load, unload): empty or a JSON object,
// whose boolean `member` is returned when present. INVALID_ARGUMENT for any other body or
// a `member` that is not a boolean.
absl::StatusOr<std::optional<bool>> OptionalBodyBool(absl::string_view body, const char* member);

}  // namespace ndserve

#endif  // NDSERVE_SERVER_JSON_CODEC_H_
