// ndserve-cli train: drives a fine-tuning session (docs/design.md §10.1).
//
//   train start --model=NAME [--model_version=N] [--loss=cross_entropy|bce_with_logits|mse]
//               [--target_output=VALUE] [--optimizer=sgd|momentum|adam] [--lr=X]
//               [--trainable=a,b]                      prints the session id
//   train step --session=ID [--steps=N] --labels=TENSOR TENSOR...
//                                                      N steps, one StepResult line each
//   train commit --session=ID                          publishes the next version
//   train abort --session=ID
//   train list
//
// A TENSOR is NAME:DATATYPE:SHAPE:DATA with DATA comma-separated values, `zeros`,
// `@file` (raw little-endian bytes) or `random` (FP32 uniform in [-1, 1], integers
// uniform in [0, --random_max)); random tensors are drawn again for every step.
#include "server/cli_train.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "memory/dtype.h"
#include "proto/train.grpc.pb.h"
#include "server/status_util.h"

ABSL_FLAG(std::string, session, "", "train step/commit/abort: the session id.");
ABSL_FLAG(int, steps, 1, "train step: how many steps to run on the batch.");
ABSL_FLAG(std::string, labels, "", "train step: the labels TENSOR.");
ABSL_FLAG(std::string, loss, "", "train start: cross_entropy (default), bce_with_logits, mse.");
ABSL_FLAG(std::string, target_output, "", "train start: the value the loss reads.");
ABSL_FLAG(std::string, optimizer, "", "train start: sgd (default), momentum, adam.");
ABSL_FLAG(double, lr, 0, "train start: learning rate; 0: the server's default.");
ABSL_FLAG(int, truncated_bptt_steps, 0,
          "train start: time steps per batch for a recurrent model whose state the session "
          "carries from batch to batch; 0: none.");
ABSL_FLAG(std::string, trainable, "",
          "train start: comma-separated initializers to train; empty: all FP32 ones.");
ABSL_FLAG(int64_t, random_max, 100, "train step: integer `random` tensors are below this.");
ABSL_DECLARE_FLAG(std::string, model);
ABSL_DECLARE_FLAG(std::string, model_version);

namespace ndserve::cli {
namespace {

namespace pb = ::ndserve::train::v1;

int Fail(const absl::Status& status) {
  std::cerr << "error: " << StatusCodeName(status.code()) << ": " << status.message() << "\n";
  return EXIT_FAILURE;
}
int Fail(const grpc::Status& status) { return Fail(FromGrpcStatus(status)); }

// A parsed TENSOR; `random` ones are redrawn by Fill.
struct TensorSpec {
  pb::Tensor tensor;
  bool random = false;
};

absl::StatusOr<TensorSpec> ParseTensor(absl::string_view spec) {
  std::vector<std::string> parts = absl::StrSplit(spec, absl::MaxSplits(':', 3));
  if (parts.size() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", spec, "': expected NAME:DATATYPE:SHAPE:DATA"));
  }
  TensorSpec out;
  out.tensor.set_name(parts[0]);
  out.tensor.set_datatype(parts[1]);
  const std::optional<DType> dtype = WireDType(parts[1]);
  if (!dtype.has_value() || !DTypeIsFixedSize(*dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", parts[0], "': datatype ",
                                                   parts[1], " is not a fixed-size one"));
  }
  std::int64_t elements = 1;
  for (absl::string_view dim : absl::StrSplit(parts[2], 'x')) {
    std::int64_t d;
    if (!absl::SimpleAtoi(dim, &d) || d < 0) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", parts[0], "': bad shape"));
    }
    out.tensor.add_shape(d);
    elements *= d;
  }
  const std::string& data = parts[3];
  std::string* raw = out.tensor.mutable_raw();
  if (data == "zeros" || data == "random") {
    raw->assign(static_cast<std::size_t>(elements) * DTypeSize(*dtype), '\0');
    out.random = data == "random";
    if (out.random && *dtype != DType::kFp32 && *dtype != DType::kInt64) {
      return absl::InvalidArgumentError("random tensors are FP32 or INT64");
    }
  } else if (data.size() > 1 && data[0] == '@') {
    std::ifstream in(data.substr(1), std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", data.substr(1)));
    std::ostringstream contents;
    contents << in.rdbuf();
    *raw = contents.str();
  } else {
    for (absl::string_view v : absl::StrSplit(data, ',')) {
      if (*dtype == DType::kFp32) {
        float f;
        if (!absl::SimpleAtof(v, &f)) return absl::InvalidArgumentError(absl::StrCat("'", v, "' is no FP32"));
        raw->append(reinterpret_cast<const char*>(&f), 4);
      } else if (*dtype == DType::kInt64) {
        std::int64_t i;
        if (!absl::SimpleAtoi(v, &i)) return absl::InvalidArgumentError(absl::StrCat("'", v, "' is no INT64"));
        raw->append(reinterpret_cast<const char*>(&i), 8);
      } else {
        return absl::InvalidArgumentError("typed-in values are FP32 or INT64; use @file");
      }
    }
  }
  return out;
}

void Fill(TensorSpec& spec, std::mt19937_64& rng) {
  if (!spec.random) return;
  std::string* raw = spec.tensor.mutable_raw();
  if (spec.tensor.datatype() == "FP32") {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (std::size_t i = 0; i + 4 <= raw->size(); i += 4) {
      const float v = dist(rng);
      std::memcpy(raw->data() + i, &v, 4);
    }
  } else {
    std::uniform_int_distribution<std::int64_t> dist(
        0, std::max<std::int64_t>(1, absl::GetFlag(FLAGS_random_max)) - 1);
    for (std::size_t i = 0; i + 8 <= raw->size(); i += 8) {
      const std::int64_t v = dist(rng);
      std::memcpy(raw->data() + i, &v, 8);
    }
  }
}

absl::Status NeedSession() {
  return absl::GetFlag(FLAGS_session).empty()
             ? absl::InvalidArgumentError("this command needs --session")
             : absl::OkStatus();
}

}  // namespace

int Train(const std::vector<char*>& args, const std::shared_ptr<grpc::Channel>& channel,
          const std::function<std::unique_ptr<grpc::ClientContext>()>& context) {
  auto stub = pb::Trainer::NewStub(channel);
  const std::string command = args.empty() ? "" : args[0];
  if (command != "step" && args.size() > 1) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("train ", command,
                                                        " takes no positional arguments")));
  }
  if (command == "start") {
    pb::StartSessionRequest request;
    request.set_model(absl::GetFlag(FLAGS_model));
    if (request.model().empty()) return Fail(absl::InvalidArgumentError("start needs --model"));
    if (const std::string v = absl::GetFlag(FLAGS_model_version); !v.empty()) {
      std::int64_t version;
      if (!absl::SimpleAtoi(v, &version)) {
        return Fail(absl::InvalidArgumentError("--model_version is not a number"));
      }
      request.set_version(version);
    }
    for (absl::string_view name :
         absl::StrSplit(absl::GetFlag(FLAGS_trainable), ',', absl::SkipEmpty())) {
      request.add_trainable(std::string(name));
    }
    request.set_loss(absl::GetFlag(FLAGS_loss));
    request.set_target_output(absl::GetFlag(FLAGS_target_output));
    request.set_optimizer(absl::GetFlag(FLAGS_optimizer));
    request.set_lr(static_cast<float>(absl::GetFlag(FLAGS_lr)));
    request.set_truncated_bptt_steps(absl::GetFlag(FLAGS_truncated_bptt_steps));
    pb::StartSessionResponse response;
    if (grpc::Status s = stub->StartSession(context().get(), request, &response); !s.ok()) {
      return Fail(s);
    }
    std::cout << response.session_id() << "\n";
    std::cerr << "training " << request.model() << " version " << response.version() << ": "
              << response.parameters_size() << " parameters\n";
    return EXIT_SUCCESS;
  }
  if (command == "step") {
    if (absl::Status s = NeedSession(); !s.ok()) return Fail(s);
    std::vector<TensorSpec> inputs;
    for (std::size_t i = 1; i < args.size(); ++i) {
      absl::StatusOr<TensorSpec> t = ParseTensor(args[i]);
      if (!t.ok()) return Fail(t.status());
      inputs.push_back(*std::move(t));
    }
    absl::StatusOr<TensorSpec> labels = ParseTensor(absl::GetFlag(FLAGS_labels));
    if (!labels.ok()) return Fail(labels.status());
    std::unique_ptr<grpc::ClientContext> ctx = context();
    auto stream = stub->Train(ctx.get());
    std::mt19937_64 rng(std::random_device{}());
    const int steps = std::max(1, absl::GetFlag(FLAGS_steps));
    for (int i = 0; i < steps; ++i) {
      pb::Batch batch;
      if (i == 0) batch.set_session_id(absl::GetFlag(FLAGS_session));
      for (TensorSpec& t : inputs) {
        Fill(t, rng);
        *batch.add_inputs() = t.tensor;
      }
      Fill(*labels, rng);
      *batch.mutable_labels() = labels->tensor;
      pb::StepResult result;
      if (!stream->Write(batch) || !stream->Read(&result)) break;
      std::cout << "step " << result.step() << " loss " << result.loss() << " grad_norm "
                << result.grad_norm() << " batch_peak_bytes " << result.batch_peak_bytes()
                << "\n";
    }
    stream->WritesDone();
    if (grpc::Status s = stream->Finish(); !s.ok()) return Fail(s);
    return EXIT_SUCCESS;
  }
  if (command == "commit") {
    if (absl::Status s = NeedSession(); !s.ok()) return Fail(s);
    pb::CommitRequest request;
    request.set_session_id(absl::GetFlag(FLAGS_session));
    pb::CommitResponse response;
    if (grpc::Status s = stub->Commit(context().get(), request, &response); !s.ok()) {
      return Fail(s);
    }
    std::cout << "committed " << response.steps() << " steps as version " << response.version()
              << "\n";
    return EXIT_SUCCESS;
  }
  if (command == "abort") {
    if (absl::Status s = NeedSession(); !s.ok()) return Fail(s);
    pb::AbortRequest request;
    request.set_session_id(absl::GetFlag(FLAGS_session));
    pb::AbortResponse response;
    if (grpc::Status s = stub->Abort(context().get(), request, &response); !s.ok()) {
      return Fail(s);
    }
    std::cout << "aborted " << request.session_id() << "\n";
    return EXIT_SUCCESS;
  }
  if (command == "list") {
    pb::ListSessionsResponse response;
    if (grpc::Status s = stub->ListSessions(context().get(), pb::ListSessionsRequest(), &response);
        !s.ok()) {
      return Fail(s);
    }
    for (const pb::SessionInfo& s : response.sessions()) {
      std::cout << s.session_id() << " " << s.model() << " version " << s.version() << ": "
                << s.steps() << " steps, " << s.trainer_bytes() << " trainer bytes\n";
    }
    return EXIT_SUCCESS;
  }
  return Fail(absl::InvalidArgumentError(
      absl::StrCat("unknown train command '", command, "' (start, step, commit, abort, list)")));
}

}  // namespace ndserve::cli
