#ifndef NDSERVE_LOADTEST_HTTP_LOAD_DRIVER_H_
#define NDSERVE_LOADTEST_HTTP_LOAD_DRIVER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "loadtest/http_body.h"
#include "loadtest/load_driver.h"

namespace ndserve::loadtest {

// One load run against a KServe v2 HTTP/REST infer endpoint over `concurrency`
// keep-alive connections, each one blocking client thread with one request outstanding
// (HTTP/1.1 has no multiplexing, so that is what a connection carries). Closed loop
// (rate 0): every connection sends its next request when the last one returns. Open loop
// (rate > 0): requests are due on a fixed schedule and taken by whichever connection is
// free; latency counts from the due time, so give enough connections for the rate and
// the server's latency, or the client's own wait shows up as latency. Uses
// options.address (host:port), concurrency, rate, duration, max_requests, timeout,
// connect_timeout, max_outstanding and validate_every; pauses are gRPC-only and refused
// here. Errors are counted by HTTP status ("HTTP_503") or "CONNECTION".
// `path` is the infer URL path; `bodies` are sent in rotation.
absl::StatusOr<LoadResult> RunHttpLoad(const LoadOptions& options, const std::string& path,
                                       const std::vector<HttpInferBody>& bodies);

}  // namespace ndserve::loadtest

#endif  // NDSERVE_LOADTEST_HTTP_LOAD_DRIVER_H_
