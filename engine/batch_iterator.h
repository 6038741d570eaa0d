#ifndef NDSERVE_ENGINE_BATCH_ITERATOR_H_
#define NDSERVE_ENGINE_BATCH_ITERATOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
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
// batch managers it opened (closed by Next and the destructor) and, on CUDA, the upload
// stream. Not thread-safe: one training loop calls Next.
class BatchIterator {
 public:
  // The next host batch, nullopt at the end. An error ends the iteration with it.
  using Source = absl::AnyInvocable<absl::StatusOr<std::optional<HostBatch>>()>;
  // Whether the source can hand over a batch (or its end) without waiting. Next asks it
  // before pulling the batch after the one it returns: a source fed by a client that
  // waits for step k's result before it sends batch k+1 must not be read ahead, or the
  // step would wait for a batch that only comes after it (the Trainer service's Train
  // stream, docs/design.md §10.1). When it says no, the next Next pulls that batch
  // itself. Null: always ready.
  using Ready = absl::AnyInvocable<bool()>;

  // INVALID_ARGUMENT for a null parent or source; FAILED_PRECONDITION when the parent's
  // device is a CUDA device that is not present.
  static absl::StatusOr<std::unique_ptr<BatchIterator>> Create(std::shared_ptr<NDManager> parent,
                                                               Source source,
                                                               Ready ready = nullptr);
  ~BatchIterator();
  BatchIterator(const BatchIterator&) = delete;
  BatchIterator& operator=(const BatchIterator&) = delete;

  // Frees the batch the previous call returned (its step is done), returns the next one
  // (uploaded while that step ran; valid until the next call) and starts uploading the
  // one after it. Null at the end of the source. INVALID_ARGUMENT for a host tensor whose
  // bytes do not match its shape and dtype (naming it); the source's errors and the
  // pool's RESOURCE_EXHAUSTED pass through.
  absl::StatusOr<const DeviceBatch*> Next();

  // Batches whose memory is held now, and the most ever held at once (never above 2).
  int live_batches() const { return live_; }
  int peak_live_batches() const { return peak_live_; }
  std::int64_t batches_uploaded() const { return uploaded_; }

 private:
  BatchIterator(std::shared_ptr<NDManager> parent, Source source, Ready ready,
                std::unique_ptr<kernels::GpuResources> gpu);

  // Pulls one host batch from the source and queues its upload: nullopt at the end.
  absl::StatusOr<std::optional<DeviceBatch>> StartUpload();
  // Waits for the queued upload (CUDA) so that the step sees the bytes.
  absl::Status FinishUpload();
  void Free(std::optional<DeviceBatch>& batch);

  const std::shared_ptr<NDManager> parent_;
  Source source_;
  Ready ready_;                                 // null: always ready
  std::unique_ptr<kernels::GpuResources> gpu_;  // null on the CPU
  std::optional<DeviceBatch> current_;          // what the last Next returned
  std::optional<DeviceBatch> next_;             // being uploaded
  // Host bytes of `next_` until its upload finished (CUDA reads them asynchronously).
  HostBatch next_host_;
  // The batch after `current_` has not been pulled yet: the next Next pulls it (true
  // before the first call).
  bool pull_pending_ = true;
  bool source_ended_ = false;
  int live_ = 0;
  int peak_live_ = 0;
  std::int64_t uploaded_ = 0;
};

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_BATCH_ITERATOR_H_
