// ndserve-echo: a bare async gRPC GRPCInferenceService that answers ModelInfer with its
// own inputs (the raw bytes moved, not copied, from request to response) and answers
// ServerLive / ServerReady. No model, no memory pool, no metrics: the ceiling that the
// daemon's request path is measured against, with the same gRPC, protobuf, completion
// queue layout and thread count.
//
// Every other RPC of the service answers UNIMPLEMENTED.
#include <grpcpp/grpcpp.h>
#include <pthread.h>
#include <signal.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "base/logging.h"
#include "proto/inference.grpc.pb.h"

ABSL_FLAG(std::string, address, "0.0.0.0:8001", "Listen address, host:port.");
ABSL_FLAG(int, threads, 0,
          "Completion queues, one polling thread each; 0: one per hardware thread.");
ABSL_FLAG(int, calls_per_queue, 16,
          "ModelInfer calls each queue keeps requested ahead of arrival.");

namespace ndserve::echo {
namespace {

using inference::GRPCInferenceService;

// ModelInfer, ServerLive and ServerReady on completion queues; the rest falls through to
// the generated synchronous base, which answers UNIMPLEMENTED.
using EchoService = GRPCInferenceService::WithAsyncMethod_ModelInfer<
    GRPCInferenceService::WithAsyncMethod_ServerLive<
        GRPCInferenceService::WithAsyncMethod_ServerReady<GRPCInferenceService::Service>>>;

// A completion-queue tag. Proceed(ok) runs on the queue's polling thread.
class Tag {
 public:
  virtual ~Tag() = default;
  virtual void Proceed(bool ok) = 0;
};

// One unary call from request to finish; it re-arms the method by creating its
// successor as soon as a call arrives. Owns itself: deleted when the call is done or
// the queue shuts down.
template <typename Request, typename Response>
class UnaryCall final : public Tag {
 public:
  using RequestMethod = void (EchoService::*)(grpc::ServerContext*, Request*,
                                              grpc::ServerAsyncResponseWriter<Response>*,
                                              grpc::CompletionQueue*, grpc::ServerCompletionQueue*,
                                              void*);
  using Handler = grpc::Status (*)(Request*, Response*);

  static void Arm(EchoService* service, grpc::ServerCompletionQueue* cq, RequestMethod method,
                  Handler handler) {
    new UnaryCall(service, cq, method, handler);
  }

  void Proceed(bool ok) override {
    if (finishing_ || !ok) {
      delete this;
      return;
    }
    Arm(service_, cq_, method_, handler_);
    const grpc::Status status = handler_(&request_, &response_);
    finishing_ = true;
    writer_.Finish(response_, status, this);
  }

 private:
  UnaryCall(EchoService* service, grpc::ServerCompletionQueue* cq, RequestMethod method,
            Handler handler)
      : service_(service), cq_(cq), method_(method), handler_(handler), writer_(&context_) {
    (service_->*method_)(&context_, &request_, &writer_, cq_, cq_, this);
  }

  EchoService* const service_;
  grpc::ServerCompletionQueue* const cq_;
  const RequestMethod method_;
  const Handler handler_;
  grpc::ServerContext context_;
  Request request_;
  Response response_;
  grpc::ServerAsyncResponseWriter<Response> writer_;
  bool finishing_ = false;
};

grpc::Status Echo(inference::ModelInferRequest* request, inference::ModelInferResponse* response) {
  response->set_model_name(request->model_name());
  response->set_model_version(request->model_version());
  response->set_id(request->id());
  for (inference::ModelInferRequest::InferInputTensor& input : *request->mutable_inputs()) {
    inference::ModelInferResponse::InferOutputTensor* output = response->add_outputs();
    output->set_name(input.name());
    output->set_datatype(input.datatype());
    *output->mutable_shape() = input.shape();
    if (input.has_contents()) output->mutable_contents()->Swap(input.mutable_contents());
  }
  response->mutable_raw_output_contents()->Swap(request->mutable_raw_input_contents());
  return grpc::Status::OK;
}

grpc::Status Live(inference::ServerLiveRequest*, inference::ServerLiveResponse* response) {
  response->set_live(true);
  return grpc::Status::OK;
}

grpc::Status Ready(inference::ServerReadyRequest*, inference::ServerReadyResponse* response) {
  response->set_ready(true);
  return grpc::Status::OK;
}

void Poll(grpc::ServerCompletionQueue* cq) {
  void* tag = nullptr;
  bool ok = false;
  while (cq->Next(&tag, &ok)) static_cast<Tag*>(tag)->Proceed(ok);
}

int Run() {
  int threads = absl::GetFlag(FLAGS_threads);
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int calls = std::max(1, absl::GetFlag(FLAGS_calls_per_queue));

  EchoService service;
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  int port = 0;
  builder.AddListeningPort(absl::GetFlag(FLAGS_address), grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(INT_MAX);
  builder.SetMaxSendMessageSize(INT_MAX);
  builder.RegisterService(&service);
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues;
  for (int i = 0; i < threads; ++i) queues.push_back(builder.AddCompletionQueue());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    LOG(ERROR) << "ndserve-echo: cannot listen on " << absl::GetFlag(FLAGS_address);
    return EXIT_FAILURE;
  }

  using Infer = UnaryCall<inference::ModelInferRequest, inference::ModelInferResponse>;
  using LiveCall = UnaryCall<inference::ServerLiveRequest, inference::ServerLiveResponse>;
  using ReadyCall = UnaryCall<inference::ServerReadyRequest, inference::ServerReadyResponse>;
  for (auto& cq : queues) {
    for (int i = 0; i < calls; ++i) {
      Infer::Arm(&service, cq.get(), &EchoService::RequestModelInfer, &Echo);
    }
    LiveCall::Arm(&service, cq.get(), &EchoService::RequestServerLive, &Live);
    ReadyCall::Arm(&service, cq.get(), &EchoService::RequestServerReady, &Ready);
  }
  std::vector<std::thread> pollers;
  for (auto& cq : queues) pollers.emplace_back(Poll, cq.get());
  LOG(INFO) << "ndserve-echo listening on port " << port << " with " << threads
            << " completion queues";

  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  int sig = 0;
  sigwait(&set, &sig);
  LOG(INFO) << "ndserve-echo: " << strsignal(sig) << ", shutting down";
  server->Shutdown();
  for (auto& cq : queues) cq->Shutdown();
  for (std::thread& t : pollers) t.join();
  return EXIT_SUCCESS;
}

}  // namespace
}  // namespace ndserve::echo

int main(int argc, char** argv) {
  // Blocked before gRPC starts threads, then taken synchronously with sigwait.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  absl::SetProgramUsageMessage(
      "ndserve-echo: bare async gRPC KServe v2 server that echoes ModelInfer inputs back.");
  absl::ParseCommandLine(argc, argv);
  return ndserve::echo::Run();
}
