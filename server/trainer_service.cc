#include "server/trainer_service.h"

#include <grpc/grpc.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "memory/dtype.h"
#include "server/status_util.h"

namespace ndserve {
namespace {

namespace pb = ::ndserve::train::v1;

absl::StatusOr<engine::HostTensor> DecodeTensor(const pb::Tensor& t, absl::string_view role) {
  engine::HostTensor out;
  out.name = t.name();
  std::optional<DType> dtype = WireDType(t.datatype());
  if (!dtype.has_value() || !DTypeIsFixedSize(*dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(role, " '", t.name(), "' has datatype '",
                                                   t.datatype(),
                                                   "', not a fixed-size KServe datatype"));
  }
  out.dtype = *dtype;
  out.shape.assign(t.shape().begin(), t.shape().end());
  out.bytes.assign(t.raw().begin(), t.raw().end());
  return out;
}

absl::StatusOr<ndserve::train::TrainingRunOptions> DecodeOptions(
    const pb::StartSessionRequest& r) {
  ndserve::train::TrainingRunOptions o;
  o.trainable.assign(r.trainable().begin(), r.trainable().end());
  if (!r.loss().empty()) {
    absl::StatusOr<ndserve::train::LossKind> loss = ndserve::train::ParseLossKind(r.loss());
    if (!loss.ok()) return loss.status();
    o.loss = *loss;
  }
  o.target_output = r.target_output();
  if (!r.optimizer().empty()) {
    absl::StatusOr<ndserve::train::OptimizerKind> opt =
        ndserve::train::ParseOptimizerKind(r.optimizer());
    if (!opt.ok()) return opt.status();
    o.optimizer = *opt;
  }
  if (r.lr() < 0 || r.momentum() < 0) {
    return absl::InvalidArgumentError("lr and momentum must not be negative");
  }
  if (r.lr() > 0) o.lr = r.lr();
  if (r.momentum() > 0) o.momentum = r.momentum();
  o.truncated_bptt_steps = r.truncated_bptt_steps();
  return o;
}

}  // namespace

TrainerServiceImpl::TrainerServiceImpl(engine::Engine* engine, TrainerMetrics* metrics,
                                       AdminAuth auth, TrainerServiceOptions options)
    : metrics_(metrics),
      auth_(std::move(auth)),
      runs_(engine, engine::TrainingSessions::Options{
                        .max_sessions_per_model = options.max_sessions_per_model,
                        .idle_timeout = options.session_idle_timeout,
                        .clock = {}}) {
  // A quarter of the timeout: a session goes at most 25% past it; at most every 30 s.
  const absl::Duration period =
      std::clamp(options.session_idle_timeout / 4, absl::Milliseconds(100), absl::Seconds(30));
  expiry_ = std::thread([this, period] { ExpiryLoop(period); });
}

TrainerServiceImpl::~TrainerServiceImpl() {
  stop_.Notify();
  expiry_.join();
}

void TrainerServiceImpl::ExpiryLoop(absl::Duration period) {
  while (!stop_.WaitForNotificationWithTimeout(period)) {
    if (const int expired = runs_.ExpireIdle(); expired > 0) {
      LOG(INFO) << "aborted " << expired << " idle training session" << (expired == 1 ? "" : "s");
    }
  }
}

grpc::Status TrainerServiceImpl::StartSession(grpc::ServerContext* context,
                                              const pb::StartSessionRequest* request,
                                              pb::StartSessionResponse* response) {
  if (absl::Status s = auth_.Check(*context); !s.ok()) return ToGrpcStatus(s);
  absl::StatusOr<ndserve::train::TrainingRunOptions> options = DecodeOptions(*request);
  if (!options.ok()) return ToGrpcStatus(options.status());
  absl::StatusOr<ndserve::train::StartedSession> started =
      runs_.Start(request->model(), request->version(), *std::move(options));
  if (!started.ok()) return ToGrpcStatus(started.status());
  response->set_session_id(started->id);
  response->set_version(started->version);
  for (const std::string& name : started->parameters) response->add_parameters(name);
  LOG(INFO) << "training session " << started->id << " started on model '" << started->model
            << "' version " << started->version << " (" << started->parameters.size()
            << " parameters)";
  return grpc::Status::OK;
}

grpc::Status TrainerServiceImpl::Train(
    grpc::ServerContext* context, grpc::ServerReaderWriter<pb::StepResult, pb::Batch>* stream) {
  if (absl::Status s = auth_.Check(*context); !s.ok()) return ToGrpcStatus(s);
  pb::Batch first;
  if (!stream->Read(&first)) return grpc::Status::OK;
  const std::string session = first.session_id();
  if (session.empty()) {
    return ToGrpcStatus(
        absl::InvalidArgumentError("the first Batch of a Train stream needs session_id"));
  }
  absl::StatusOr<std::string> model = runs_.ModelOf(session);
  if (!model.ok()) return ToGrpcStatus(model.status());

  // The stream is the batch iterator's source: each Batch becomes a host batch (inputs,
  // then labels) that the iterator's reader thread uploads under the session's trainer
  // scope while the previous step runs. gRPC lets that thread Read while this one
  // Writes the results.
  std::optional<pb::Batch> pending(std::move(first));
  auto source = [&]() -> absl::StatusOr<std::optional<engine::HostBatch>> {
    pb::Batch batch;
    if (pending.has_value()) {
      batch = *std::move(pending);
      pending.reset();
    } else if (!stream->Read(&batch)) {
      // The client half-closed, went away or cancelled: the end either way (a
      // cancelled call is answered CANCELLED below).
      return std::optional<engine::HostBatch>();
    }
    if (!batch.session_id().empty() && batch.session_id() != session) {
      return absl::InvalidArgumentError(absl::StrCat("a Train stream serves one session: '",
                                                     session, "', not '", batch.session_id(), "'"));
    }
    if (!batch.has_labels()) return absl::InvalidArgumentError("Batch has no labels");
    engine::HostBatch host;
    host.reserve(batch.inputs_size() + 1);
    for (const pb::Tensor& t : batch.inputs()) {
      NDS_ASSIGN_OR_RETURN(engine::HostTensor decoded, DecodeTensor(t, "input"));
      host.push_back(std::move(decoded));
    }
    NDS_ASSIGN_OR_RETURN(engine::HostTensor labels, DecodeTensor(batch.labels(), "labels"));
    host.push_back(std::move(labels));
    return std::optional<engine::HostBatch>(std::move(host));
  };
  // The stream ends (a step failed, the client stopped reading) while the reader waits
  // in Read for a Batch that a client waiting for a result never sends: only ending the
  // call makes that Read return. Cancelling it with the step's error is what the client
  // gets (the handler's own status can no longer be sent then); ending for another
  // reason, a plain cancel.
  auto interrupt = [context](const absl::Status& why) {
    if (why.ok()) {
      context->TryCancel();
      return;
    }
    const grpc::Status status = ToGrpcStatus(why);
    grpc_call_cancel_with_status(context->c_call(),
                                 static_cast<grpc_status_code>(status.error_code()),
                                 status.error_message().c_str(), nullptr);
  };
  const absl::Status streamed = runs_.StreamReadingAhead(
      session, source, interrupt, [&](const ndserve::train::StepResult& step) {
        metrics_->RecordStep(*model, step.loss, step.duration);
        pb::StepResult result;
        result.set_step(step.step);
        result.set_loss(step.loss);
        result.set_grad_norm(step.grad_norm);
        result.set_batch_peak_bytes(step.batch_peak_bytes);
        result.set_batches_held(step.batches_held);
        return stream->Write(result);  // false: the client went away
      });
  if (streamed.ok() && context->IsCancelled()) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "the Train stream was cancelled");
  }
  return ToGrpcStatus(streamed);
}

grpc::Status TrainerServiceImpl::Commit(grpc::ServerContext* context,
                                        const pb::CommitRequest* request,
                                        pb::CommitResponse* response) {
  if (absl::Status s = auth_.Check(*context); !s.ok()) return ToGrpcStatus(s);
  absl::StatusOr<ndserve::train::CommitResult> committed = runs_.Commit(request->session_id());
  if (!committed.ok()) return ToGrpcStatus(committed.status());
  response->set_version(committed->version);
  response->set_steps(committed->steps);
  LOG(INFO) << "training session " << request->session_id() << " committed after "
            << committed->steps << " steps as version " << committed->version;
  return grpc::Status::OK;
}

grpc::Status TrainerServiceImpl::Abort(grpc::ServerContext* context,
                                       const pb::AbortRequest* request,
                                       pb::AbortResponse* /*response*/) {
  if (absl::Status s = auth_.Check(*context); !s.ok()) return ToGrpcStatus(s);
  return ToGrpcStatus(runs_.Abort(request->session_id()));
}

grpc::Status TrainerServiceImpl::ListSessions(grpc::ServerContext* context,
                                              const pb::ListSessionsRequest* /*request*/,
                                              pb::ListSessionsResponse* response) {
  if (absl::Status s = auth_.Check(*context); !s.ok()) return ToGrpcStatus(s);
  for (const engine::TrainingSessionInfo& info : runs_.List()) {
    pb::SessionInfo* out = response->add_sessions();
    out->set_session_id(info.id);
    out->set_model(info.model);
    out->set_version(info.version);
    out->set_steps(info.steps);
    out->set_trainer_bytes(info.trainer_bytes);
    out->set_started_unix(absl::ToUnixSeconds(info.started));
    out->set_last_used_unix(absl::ToUnixSeconds(info.last_used));
  }
  return grpc::Status::OK;
}

}  // namespace ndserve
