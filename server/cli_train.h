#ifndef NDSERVE_SERVER_CLI_TRAIN_H_
#define NDSERVE_SERVER_CLI_TRAIN_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

namespace ndserve::cli {

// `ndserve-cli train <start|step|commit|abort|list>` against the Trainer service on the
// admin address (docs/design.md §10.1). `args` are the words after "train"; `channel`
// the admin channel; `context` makes one call's context (deadline, admin token). Returns
// the process exit status.
int Train(const std::vector<char*>& args, const std::shared_ptr<grpc::Channel>& channel,
          const std::function<std::unique_ptr<grpc::ClientContext>()>& context);

}  // namespace ndserve::cli

#endif  // NDSERVE_SERVER_CLI_TRAIN_H_
