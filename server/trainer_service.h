#ifndef NDSERVE_SERVER_TRAINER_SERVICE_H_
#define NDSERVE_SERVER_TRAINER_SERVICE_H_

#include <memory>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "engine/engine.h"
#include "proto/train.grpc.pb.h"
#include "server/admin_auth.h"
#include "server/trainer_metrics.h"
#include "train/training_runs.h"

namespace ndserve {

struct TrainerServiceOptions {
  absl::Duration session_idle_timeout = absl::Minutes(10);  // --train_session_idle_seconds
  int max_sessions_per_model = 4;
};

// ndserve.train.v1.Trainer (docs/design.md §10.1) on the admin listener. Handlers are
// thin: token rule -> decode -> train::TrainingRuns -> map the status -> metrics. A
// timer thread aborts sessions idle past the timeout.
//
// Synchronous like the admin service: steps are CPU work that would stall the
// inference completion queues, and training clients are few. Borrows the engine and
// the metrics (both must outlive the service); owns the sessions (the destructor
// aborts them) and the timer. Thread-safe.
class TrainerServiceImpl final : public ndserve::train::v1::Trainer::Service {
 public:
  TrainerServiceImpl(engine::Engine* engine, TrainerMetrics* metrics, AdminAuth auth,
                     TrainerServiceOptions options);
  ~TrainerServiceImpl() override;

  grpc::Status StartSession(grpc::ServerContext* context,
                            const ndserve::train::v1::StartSessionRequest* request,
                            ndserve::train::v1::StartSessionResponse* response) override;
  grpc::Status Train(grpc::ServerContext* context,
                     grpc::ServerReaderWriter<ndserve::train::v1::StepResult,
                                              ndserve::train::v1::Batch>* stream) override;
  grpc::Status Commit(grpc::ServerContext* context,
                      const ndserve::train::v1::CommitRequest* request,
                      ndserve::train::v1::CommitResponse* response) override;
  grpc::Status Abort(grpc::ServerContext* context, const ndserve::train::v1::AbortRequest* request,
                     ndserve::train::v1::AbortResponse* response) override;
  grpc::Status ListSessions(grpc::ServerContext* context,
                            const ndserve::train::v1::ListSessionsRequest* request,
                            ndserve::train::v1::ListSessionsResponse* response) override;

 private:
  void ExpiryLoop(absl::Duration period);

  TrainerMetrics* const metrics_;
  const AdminAuth auth_;
  ndserve::train::TrainingRuns runs_;
  absl::Notification stop_;
  std::thread expiry_;
};

}  // namespace ndserve

#endif  // NDSERVE_SERVER_TRAINER_SERVICE_H_
