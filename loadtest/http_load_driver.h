#ifndef NDSERVE_LOADTEST_HTTP_LOAD_DRIVER_H_
#define NDSERVE_LOADTEST_HTTP_LOAD_DRIVER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "loadtest/http_body.h"
#include "loadtest/load_driver.h"

namespace ndserve::loadtest {

// One closed-loop load run against a KServe v2 HTTP/REST infer endpoint: `concurrency`
// keep-alive connections, each one blocking client thread with one request outstanding
// (HTTP/1.1 has no multiplexing, so that is what a connection carries). Uses
// options.address (host:port), concurrency, duration, max_requests, timeout,
// connect_timeout and validate_every; an open loop (rate) and pauses are gRPC-only and
// refused here. Errors are counted by HTTP status ("HTTP_503") or "CONNECTION".
// `path` is the infer URL path; `bodies` are sent in rotation.
absl::StatusOr<LoadResult> RunHttpLoad(const LoadOptions& options, const std::string& path,
                                       const std::vector<HttpInferBody>& bodies);

}  // namespace ndserve::loadtest

#endif  // NDSERVE_LOADTEST_HTTP_LOAD_DRIVER_H_
