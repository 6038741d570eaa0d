#ifndef NDSERVE_SERVER_CLI_HTTP_H_
#define NDSERVE_SERVER_CLI_HTTP_H_

// ndserve-cli --http: the KServe v2 HTTP/REST calls the CLI makes instead of gRPC
// (health, model metadata, infer), answering in the gRPC messages so that the CLI prints
// both the same way. Infer sends the binary tensor data extension both ways, so the bytes
// printed are the bytes the model produced.

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/inference.pb.h"

namespace ndserve::cli {

// GET `path` on http://`address`: the status code and body. UNAVAILABLE when no answer.
struct HttpReply {
  int status = 0;
  std::string body;
};
absl::StatusOr<HttpReply> HttpGet(const std::string& address, const std::string& path,
                                  absl::Duration timeout);

// POST /v2/models/<model>[/versions/<v>]/infer. A non-200 answer becomes the status its
// HTTP code stands for (400 INVALID_ARGUMENT, 404 NOT_FOUND, 503 UNAVAILABLE, ...) with
// the server's {"error"} text; a reply that is not the binary extension's shape INTERNAL.
absl::StatusOr<inference::ModelInferResponse> HttpInfer(
    const std::string& address, const inference::ModelInferRequest& request,
    absl::Duration timeout);

}  // namespace ndserve::cli

#endif  // NDSERVE_SERVER_CLI_HTTP_H_
