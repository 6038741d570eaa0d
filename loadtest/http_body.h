#ifndef NDSERVE_LOADTEST_HTTP_BODY_H_
#define NDSERVE_LOADTEST_HTTP_BODY_H_

// What a KServe v2 HTTP/REST client sends and reads: an infer request body built from the
// same ModelInferRequest the gRPC run sends (so both protocols carry identical tensors),
// and a model's inputs read from its metadata JSON. Pure functions; the server's side of
// the same format is server/json_codec.h.

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "loadtest/tensor_spec.h"
#include "proto/inference.pb.h"

namespace ndserve::loadtest {

enum class HttpFormat {
  // JSON header, then each input's raw bytes (the binary tensor data extension); the
  // outputs are asked for binary too.
  kBinary,
  // Every tensor as a flat JSON `data` array, outputs as JSON.
  kJson,
};

struct HttpInferBody {
  std::string body;
  // The Inference-Header-Content-Length to send: the JSON part's length. 0: all JSON.
  std::size_t json_bytes = 0;
};

// INVALID_ARGUMENT for FP16/BF16 (or an unknown datatype) asked as JSON: KServe v2 has no
// JSON numbers for them, they travel binary. Byte counts against shapes are the server's
// to check.
absl::StatusOr<HttpInferBody> HttpInferBodyFor(const inference::ModelInferRequest& request,
                                               HttpFormat format);

// "/v2/models/<model>[/versions/<version>]".
std::string HttpModelPath(absl::string_view model, absl::string_view version);

// The `inputs` of a GET /v2/models/<model> answer. INVALID_ARGUMENT for a body that is
// not that JSON.
absl::StatusOr<std::vector<TensorSpec>> InputsFromHttpMetadata(absl::string_view json);

}  // namespace ndserve::loadtest

#endif  // NDSERVE_LOADTEST_HTTP_BODY_H_
