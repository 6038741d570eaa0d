#ifndef NDSERVE_ENGINE_BATCH_ITERATOR_H_
#define NDSERVE_ENGINE_BATCH_ITERATOR_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "engine/host_tensor.h"
#include "memory/dtype.h"
#include "memory/nd_array.h"
#include "memory/nd_manager.h"

namespace ndserve::kernels {
class GpuResources;
}

namespace ndserve::engine {

// A batch as it arrives (a training client's inputs and labels).
using HostBatch = std::vector<HostTensor>;

// A batch on the device: one array per host tensor, in the same order, all held by the
// batch's own batch-level manager.
struct DeviceBatch {
  std::int64_t index = 0;  // 0 for the first batch of the iterator
  std::vector<std::string> names;
  std::vector<NDArray> arrays;
  std::shared_ptr<NDManager> manager;

  // The array named `name`, or null.
  const NDArray* Find(absl::string_view name) const;
};

// Eager batch iteration (docs/design.md §2.1): while step k runs on batch k, batch k+1 is
// already being uploaded, on the iterator's own CUDA stream (on the CPU the upload is
// the copy into the pool, done at once), and batch k is freed as soon as the step asks
// for the next one. So a step waits for no upload after the first, and a training
// session never holds more than two batches of device memory however long it runs.
//
// Each batch lives in a batch-level manager ("batch-data/<index>") under `parent` (the
// trainer scope's manager; opening it is allowed while the trainer is capped for a
// step), so closing the parent frees the batches too. Ownership: owns the source, the
// batch managers it opened (closed by Next and the destructor), on CUDA the upload
// stream, and in read-ahead mode its reader thread (joined by Stop and the destructor).
// One training loop calls Next and Stop; the counters may be read from any thread.
//
// Two ways to pull the source. Create pulls it on the caller's thread, in Next, asking
// `ready` first. CreateReadAhead pulls it on a reader thread of the iterator's own: a
// source that blocks until the batch arrives (a synchronous gRPC stream's Read) then
// overlaps step k whatever the client does: a client that sends ahead finds batch k+1
// read and uploaded when step k starts, and one that waits for step k's result before
// sending batch k+1 blocks only the reader (docs/design.md §10.1).
class BatchIterator {
 public:
  // The next host batch, nullopt at the end. An error ends the iteration with it.
  using Source = absl::AnyInvocable<absl::StatusOr<std::optional<HostBatch>>()>;
  // Whether the source can hand over a batch (or its end) without waiting. Next asks it
  // before pulling the batch after the one it returns: a source fed by a client that
  // waits for step k's result before it sends batch k+1 must not be read ahead on the
  // caller's thread, or the step would wait for a batch that only comes after it
  // (CreateReadAhead reads such a source on a thread of its own). When it says no, the
  // next Next pulls that batch itself. Null: always ready.
  using Ready = absl::AnyInvocable<bool()>;
  // Read-ahead mode: called once, from Stop on the training loop's thread, when the
  // reader thread is waiting in the source. It must make that pull return (the Trainer
  // service cancels the RPC, with `why` as its status when that is an error), since
  // Stop joins the reader. Not called when the reader is idle or done.
  using Interrupt = absl::AnyInvocable<void(const absl::Status& why)>;
  // Called before each upload; the upload holds what it returns until its bytes landed
  // (a training session's use, so that closing the session waits for the upload). An
  // error ends the iteration with it. Null: no guard.
  using Guard = absl::AnyInvocable<absl::StatusOr<std::shared_ptr<void>>()>;

  // INVALID_ARGUMENT for a null parent or source; FAILED_PRECONDITION when the parent's
  // device is a CUDA device that is not present.
  static absl::StatusOr<std::unique_ptr<BatchIterator>> Create(std::shared_ptr<NDManager> parent,
                                                               Source source,
                                                               Ready ready = nullptr,
                                                               Guard guard = nullptr);
  // Read-ahead mode: a reader thread pulls `source` and uploads each batch into its
  // batch scope while the steps run, never holding more than two batches (the one the
  // step has and the one after it); it waits for the step to free one before it pulls
  // again. INVALID_ARGUMENT for a null parent, source or interrupt; FAILED_PRECONDITION
  // as Create.
  static absl::StatusOr<std::unique_ptr<BatchIterator>> CreateReadAhead(
      std::shared_ptr<NDManager> parent, Source source, Interrupt interrupt,
      Guard guard = nullptr);
  // Calls Stop(OK).
  ~BatchIterator();
  BatchIterator(const BatchIterator&) = delete;
  BatchIterator& operator=(const BatchIterator&) = delete;

  // Frees the batch the previous call returned (its step is done), returns the next one
  // (uploaded while that step ran; valid until the next call) and starts uploading the
  // one after it. Null at the end of the source. INVALID_ARGUMENT for a host tensor whose
  // bytes do not match its shape and dtype (naming it); the source's errors and the
  // pool's RESOURCE_EXHAUSTED pass through.
  // In read-ahead mode Next waits for the reader when batch k+1 is not uploaded yet, and
  // the reader's errors come out of Next after the batches read before them.
  absl::StatusOr<const DeviceBatch*> Next();

  // Ends the iteration (read-ahead mode: stops the reader, interrupting a pull it waits
  // in with `why`, the status the training loop ends with, and joins it) and frees every
  // batch held. Next returns null afterwards. Idempotent.
  void Stop(const absl::Status& why);

  // Batches whose memory is held now, and the most ever held at once (never above 2).
  int live_batches() const ABSL_LOCKS_EXCLUDED(mu_);
  int peak_live_batches() const ABSL_LOCKS_EXCLUDED(mu_);
  std::int64_t batches_uploaded() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  BatchIterator(std::shared_ptr<NDManager> parent, Source source, Ready ready, Interrupt interrupt,
                std::unique_ptr<kernels::GpuResources> gpu);

  // Pulls one host batch from the source and queues its upload: nullopt at the end.
  absl::StatusOr<std::optional<DeviceBatch>> StartUpload();
  // Queues the upload of `host` (index `uploaded_`) into a new batch scope; `use` gets
  // the guard's token, to hold until the upload finished.
  absl::StatusOr<DeviceBatch> Upload(const HostBatch& host, std::shared_ptr<void>* use);
  // Waits for the queued upload (CUDA) so that the step sees the bytes.
  absl::Status FinishUpload();
  void Free(std::optional<DeviceBatch>& batch) ABSL_LOCKS_EXCLUDED(mu_);
  // Read-ahead mode: the reader thread's loop, and Next's side of it.
  void ReadAhead() ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<const DeviceBatch*> NextReadAhead() ABSL_LOCKS_EXCLUDED(mu_);

  const std::shared_ptr<NDManager> parent_;
  Source source_;
  Ready ready_;                                 // null: always ready
  Interrupt interrupt_;                         // read-ahead mode only
  Guard guard_;                                 // null: uploads need no guard
  std::shared_ptr<void> next_use_;              // the guard's token for `next_`'s upload
  std::unique_ptr<kernels::GpuResources> gpu_;  // null on the CPU
  std::optional<DeviceBatch> current_;          // what the last Next returned
  std::optional<DeviceBatch> next_;             // being uploaded
  // Host bytes of `next_` until its upload finished (CUDA reads them asynchronously).
  HostBatch next_host_;
  // The batch after `current_` has not been pulled yet: the next Next pulls it (true
  // before the first call).
  bool pull_pending_ = true;
  bool source_ended_ = false;
  bool stopped_ = false;

  mutable absl::Mutex mu_;
  absl::CondVar changed_;  // a batch freed or read ahead, the reader done, Stop
  int live_ ABSL_GUARDED_BY(mu_) = 0;
  int peak_live_ ABSL_GUARDED_BY(mu_) = 0;
  std::int64_t uploaded_ ABSL_GUARDED_BY(mu_) = 0;
  // Read-ahead mode: uploaded batches Next has not handed over yet, in order; the
  // reader's end (the source ended or failed, or Stop) and its error, which Next
  // returns once the queue is empty; whether it waits in the source now.
  std::deque<DeviceBatch> read_ahead_ ABSL_GUARDED_BY(mu_);
  bool reader_done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status reader_status_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool in_source_ ABSL_GUARDED_BY(mu_) = false;
  std::thread reader_;
};

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_BATCH_ITERATOR_H_
