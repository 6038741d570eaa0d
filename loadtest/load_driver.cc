#include "loadtest/load_driver.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/proto_utils.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <memory>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "proto/inference.pb.h"

namespace ndserve::loadtest {
namespace {

constexpr char kModelInferMethod[] = "/inference.GRPCInferenceService/ModelInfer";
constexpr std::int64_t kNoLimit = INT64_MAX;
// How often an idle worker looks at the clock and the pause state.
constexpr std::int64_t kPollNanos = 1'000'000;
constexpr std::int64_t kIdleNanos = 50'000'000;

std::int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

gpr_timespec Deadline(std::int64_t steady_nanos) {
  const std::int64_t wait = std::max<std::int64_t>(0, steady_nanos - NowNanos());
  return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_nanos(wait, GPR_TIMESPAN));
}

// What every worker shares. Requests are claimed one at a time below `limit`, which the
// coordinator raises after each pause; `total` is the run's request budget.
struct SharedState {
  std::int64_t total = kNoLimit;
  std::atomic<std::int64_t> limit{kNoLimit};
  std::atomic<std::int64_t> claimed{0};
  std::atomic<std::int64_t> completed{0};
  // Steady-clock end of issuing; pushed back by the length of each pause.
  std::atomic<std::int64_t> end_nanos{kNoLimit};
  std::atomic<int> running_workers{0};

  enum class Claim { kGranted, kPaused, kDone };
  Claim TryClaim() {
    std::int64_t c = claimed.load(std::memory_order_relaxed);
    while (true) {
      if (c >= total) return Claim::kDone;
      if (c >= limit.load(std::memory_order_acquire)) return Claim::kPaused;
      if (claimed.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel)) {
        return Claim::kGranted;
      }
    }
  }
};

// One request in flight; owned by its worker from Issue() to Complete().
struct Call {
  grpc::ClientContext context;
  grpc::ByteBuffer response;
  grpc::Status status;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> reader;
  std::int64_t start_nanos = 0;
};

// One client thread: its completion queue, its share of the channels and of the streams
// (closed loop) or of the rate (open loop), and its own counters, merged at the end.
class Worker {
 public:
  Worker(const LoadOptions& options, SharedState* shared,
         const std::vector<grpc::ByteBuffer>* requests,
         std::vector<std::shared_ptr<grpc::Channel>> channels, int index, int streams,
         std::int64_t start_nanos)
      : options_(options),
        shared_(shared),
        requests_(requests),
        next_request_(static_cast<size_t>(index) % requests->size()),
        streams_(streams),
        max_outstanding_(std::max(1, options.max_outstanding / std::max(1, options.threads))) {
    for (auto& channel : channels) stubs_.push_back(std::make_unique<grpc::GenericStub>(channel));
    if (options_.rate > 0) {
      interval_nanos_ = std::max<std::int64_t>(
          1, static_cast<std::int64_t>(1e9 * options_.threads / options_.rate));
      // Staggered so the threads' schedules interleave instead of firing together.
      next_send_nanos_ = start_nanos + interval_nanos_ * index / std::max(1, options_.threads);
    }
  }

  void Run() {
    int idle_streams = streams_;
    while (true) {
      const std::int64_t now = NowNanos();
      bool paused = false;
      if (!done_issuing_) {
        paused = options_.rate > 0 ? IssueOpenLoop(now) : IssueClosedLoop(now, &idle_streams);
      }
      if (done_issuing_ && outstanding_ == 0) break;
      std::int64_t wake = now + kIdleNanos;
      if (paused) {
        wake = now + kPollNanos;
      } else if (options_.rate > 0 && !done_issuing_) {
        wake = std::min(wake, next_send_nanos_);
      }
      void* tag = nullptr;
      bool ok = false;
      switch (cq_.AsyncNext(&tag, &ok, Deadline(wake))) {
        case grpc::CompletionQueue::GOT_EVENT:
          Complete(static_cast<Call*>(tag), ok);
          ++idle_streams;
          break;
        case grpc::CompletionQueue::TIMEOUT:
          break;
        case grpc::CompletionQueue::SHUTDOWN:
          return;
      }
    }
    cq_.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq_.Next(&tag, &ok)) {
    }
  }

  LoadResult& result() { return result_; }

 private:
  // Returns true when issuing is held by a pause.
  bool IssueClosedLoop(std::int64_t now, int* idle_streams) {
    while (*idle_streams > 0) {
      if (now >= shared_->end_nanos.load(std::memory_order_relaxed)) {
        done_issuing_ = true;
        return false;
      }
      switch (shared_->TryClaim()) {
        case SharedState::Claim::kDone:
          done_issuing_ = true;
          return false;
        case SharedState::Claim::kPaused:
          return true;
        case SharedState::Claim::kGranted:
          Issue(now);
          --*idle_streams;
          break;
      }
    }
    return false;
  }

  bool IssueOpenLoop(std::int64_t now) {
    while (next_send_nanos_ <= now) {
      if (next_send_nanos_ >= shared_->end_nanos.load(std::memory_order_relaxed)) {
        done_issuing_ = true;
        return false;
      }
      if (outstanding_ >= max_outstanding_) {
        ++result_.not_sent;
        next_send_nanos_ += interval_nanos_;
        continue;
      }
      switch (shared_->TryClaim()) {
        case SharedState::Claim::kDone:
          done_issuing_ = true;
          return false;
        case SharedState::Claim::kPaused:
          // Resume on a fresh schedule instead of bursting through the missed slots.
          next_send_nanos_ = now + kPollNanos;
          return true;
        case SharedState::Claim::kGranted:
          Issue(next_send_nanos_);
          next_send_nanos_ += interval_nanos_;
          break;
      }
    }
    return false;
  }

  void Issue(std::int64_t start_nanos) {
    auto* call = new Call;
    call->start_nanos = start_nanos;
    call->context.set_deadline(std::chrono::system_clock::now() +
                               absl::ToChronoNanoseconds(options_.timeout));
    const grpc::ByteBuffer& request = (*requests_)[next_request_];
    next_request_ = (next_request_ + 1) % requests_->size();
    result_.request_bytes += static_cast<std::int64_t>(request.Length());
    grpc::GenericStub& stub = *stubs_[next_stub_];
    next_stub_ = (next_stub_ + 1) % stubs_.size();
    call->reader = stub.PrepareUnaryCall(&call->context, kModelInferMethod, request, &cq_);
    call->reader->StartCall();
    call->reader->Finish(&call->response, &call->status, call);
    ++outstanding_;
    ++result_.sent;
  }

  void Complete(Call* call, bool ok) {
    const std::int64_t latency = NowNanos() - call->start_nanos;
    --outstanding_;
    if (!ok) {
      ++result_.errors["CQ_FAILED"];
    } else if (!call->status.ok()) {
      ++result_.errors[GrpcCodeName(call->status.error_code())];
      result_.error_latency.Record(latency);
    } else {
      result_.response_bytes += static_cast<std::int64_t>(call->response.Length());
      if (ShouldValidate() && !Valid(&call->response)) {
        ++result_.errors["INVALID_RESPONSE"];
      } else {
        ++result_.ok;
        result_.latency.Record(latency);
      }
    }
    delete call;
    shared_->completed.fetch_add(1, std::memory_order_acq_rel);
  }

  bool ShouldValidate() {
    const std::int64_t n = responses_seen_++;
    if (n == 0) return true;
    return options_.validate_every > 0 && n % options_.validate_every == 0;
  }

  static bool Valid(grpc::ByteBuffer* buffer) {
    inference::ModelInferResponse response;
    if (!grpc::SerializationTraits<inference::ModelInferResponse>::Deserialize(buffer, &response)
             .ok()) {
      return false;
    }
    if (response.outputs_size() == 0) return false;
    if (response.raw_output_contents_size() == response.outputs_size()) return true;
    return response.raw_output_contents_size() == 0 &&
           std::all_of(response.outputs().begin(), response.outputs().end(),
                       [](const auto& o) { return o.has_contents(); });
  }

  const LoadOptions& options_;
  SharedState* const shared_;
  const std::vector<grpc::ByteBuffer>* const requests_;
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs_;
  grpc::CompletionQueue cq_;
  size_t next_request_;
  size_t next_stub_ = 0;
  const int streams_;
  const int max_outstanding_;
  std::int64_t interval_nanos_ = 0;
  std::int64_t next_send_nanos_ = 0;
  int outstanding_ = 0;
  bool done_issuing_ = false;
  std::int64_t responses_seen_ = 0;
  LoadResult result_;
};

}  // namespace

std::int64_t LoadResult::error_count() const {
  std::int64_t n = 0;
  for (const auto& [code, count] : errors) n += count;
  return n;
}

std::string GrpcCodeName(int code) {
  static constexpr const char* kNames[] = {"OK",
                                           "CANCELLED",
                                           "UNKNOWN",
                                           "INVALID_ARGUMENT",
                                           "DEADLINE_EXCEEDED",
                                           "NOT_FOUND",
                                           "ALREADY_EXISTS",
                                           "PERMISSION_DENIED",
                                           "RESOURCE_EXHAUSTED",
                                           "FAILED_PRECONDITION",
                                           "ABORTED",
                                           "OUT_OF_RANGE",
                                           "UNIMPLEMENTED",
                                           "INTERNAL",
                                           "UNAVAILABLE",
                                           "DATA_LOSS",
                                           "UNAUTHENTICATED"};
  if (code >= 0 && code < static_cast<int>(std::size(kNames))) return kNames[code];
  return absl::StrCat("CODE_", code);
}

absl::StatusOr<LoadResult> RunLoad(const LoadOptions& options) {
  if (options.requests.empty()) return absl::InvalidArgumentError("no requests to send");
  if (options.duration <= absl::ZeroDuration() && options.max_requests <= 0) {
    return absl::InvalidArgumentError("a load run needs a duration or a request count");
  }
  if (options.rate <= 0 && options.concurrency <= 0) {
    return absl::InvalidArgumentError("closed loop needs concurrency >= 1");
  }
  LoadOptions opts = options;
  if (opts.rate <= 0) opts.threads = std::min(opts.threads, opts.concurrency);
  opts.threads = std::max(1, opts.threads);
  opts.channels = std::max(opts.threads, opts.channels);

  std::vector<grpc::ByteBuffer> requests;
  requests.reserve(opts.requests.size());
  for (const std::string& r : opts.requests) {
    grpc::Slice slice(r);
    requests.emplace_back(&slice, 1);
  }

  // Connections are made before the clock starts: the run measures serving, not dialing.
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < opts.channels; ++i) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    // Without it every channel to one target shares one subchannel, i.e. one connection.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("ndserve.loadtest.channel", i);
    auto channel =
        grpc::CreateCustomChannel(opts.address, grpc::InsecureChannelCredentials(), args);
    if (!channel->WaitForConnected(std::chrono::system_clock::now() +
                                   absl::ToChronoNanoseconds(opts.connect_timeout))) {
      return absl::UnavailableError(absl::StrCat("cannot connect to ", opts.address));
    }
    channels.push_back(std::move(channel));
  }

  SharedState shared;
  shared.total = opts.max_requests > 0 ? opts.max_requests : kNoLimit;
  if (opts.pause_every > 0) shared.limit = std::min(shared.total, opts.pause_every);
  const std::int64_t start = NowNanos();
  if (opts.duration > absl::ZeroDuration()) {
    shared.end_nanos = start + absl::ToInt64Nanoseconds(opts.duration);
  }

  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 0; i < opts.threads; ++i) {
    std::vector<std::shared_ptr<grpc::Channel>> mine;
    for (int c = i; c < opts.channels; c += opts.threads) mine.push_back(channels[c]);
    const int streams =
        opts.rate > 0 ? 0 : opts.concurrency / opts.threads + (i < opts.concurrency % opts.threads);
    workers.push_back(
        std::make_unique<Worker>(opts, &shared, &requests, std::move(mine), i, streams, start));
  }
  shared.running_workers = opts.threads;
  std::vector<std::thread> threads;
  for (auto& w : workers) {
    threads.emplace_back([&shared, worker = w.get()] {
      worker->Run();
      shared.running_workers.fetch_sub(1, std::memory_order_acq_rel);
    });
  }

  std::int64_t paused_nanos = 0;
  if (opts.pause_every > 0) {
    while (shared.running_workers.load(std::memory_order_acquire) > 0) {
      const std::int64_t limit = shared.limit.load(std::memory_order_acquire);
      // Every claim below the limit has completed: nothing is in flight.
      if (limit < shared.total && shared.completed.load(std::memory_order_acquire) >= limit) {
        const std::int64_t pause_start = NowNanos();
        if (opts.on_pause) opts.on_pause(limit);
        const std::int64_t pause = NowNanos() - pause_start;
        paused_nanos += pause;
        if (shared.end_nanos.load() != kNoLimit) shared.end_nanos.fetch_add(pause);
        shared.limit.store(std::min(shared.total, limit + opts.pause_every),
                           std::memory_order_release);
        continue;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  for (std::thread& t : threads) t.join();
  const std::int64_t end = NowNanos();

  LoadResult result;
  for (auto& w : workers) {
    LoadResult& r = w->result();
    result.sent += r.sent;
    result.ok += r.ok;
    result.not_sent += r.not_sent;
    for (const auto& [code, count] : r.errors) result.errors[code] += count;
    result.latency.Merge(r.latency);
    result.error_latency.Merge(r.error_latency);
    result.request_bytes += r.request_bytes;
    result.response_bytes += r.response_bytes;
  }
  result.paused = absl::Nanoseconds(paused_nanos);
  result.elapsed = absl::Nanoseconds(end - start - paused_nanos);
  return result;
}

}  // namespace ndserve::loadtest
