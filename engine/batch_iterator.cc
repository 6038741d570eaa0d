#include "engine/batch_iterator.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/gpu_resources.h"
#include "memory/device_copy.h"

namespace ndserve::engine {
namespace {

absl::Status CheckTensor(const HostTensor& t, std::int64_t index) {
  std::int64_t count = 1;
  for (std::int64_t dim : t.shape) {
    if (dim < 0 || __builtin_mul_overflow(count, dim, &count)) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch ", index, ": tensor '", t.name, "' has an invalid shape"));
    }
  }
  std::uint64_t want = 0;
  if (DTypeSize(t.dtype) == 0 ||
      __builtin_mul_overflow(static_cast<std::uint64_t>(count), DTypeSize(t.dtype), &want) ||
      want != t.bytes.size()) {
    return absl::InvalidArgumentError(absl::StrCat("batch ", index, ": tensor '", t.name, "' has ",
                                                   t.bytes.size(),
                                                   " bytes, which does not match its shape and "
                                                   "dtype ",
                                                   DTypeName(t.dtype)));
  }
  return absl::OkStatus();
}

}  // namespace

const NDArray* DeviceBatch::Find(absl::string_view name) const {
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return &arrays[i];
  }
  return nullptr;
}

absl::StatusOr<std::unique_ptr<BatchIterator>> BatchIterator::Create(
    std::shared_ptr<NDManager> parent, Source source, Ready ready, Guard guard) {
  if (parent == nullptr) return absl::InvalidArgumentError("a batch iterator needs a parent scope");
  if (source == nullptr) return absl::InvalidArgumentError("a batch iterator needs a source");
  std::unique_ptr<kernels::GpuResources> gpu;
  if (parent->device().is_cuda()) {
    NDS_ASSIGN_OR_RETURN(gpu, kernels::GpuResources::Create(parent->device()));
  }
  auto it = std::unique_ptr<BatchIterator>(new BatchIterator(
      std::move(parent), std::move(source), std::move(ready), nullptr, std::move(gpu)));
  it->guard_ = std::move(guard);
  return it;
}

absl::StatusOr<std::unique_ptr<BatchIterator>> BatchIterator::CreateReadAhead(
    std::shared_ptr<NDManager> parent, Source source, Interrupt interrupt, Guard guard) {
  if (interrupt == nullptr) {
    return absl::InvalidArgumentError("a reading-ahead batch iterator needs an interrupt");
  }
  NDS_ASSIGN_OR_RETURN(std::unique_ptr<BatchIterator> it,
                       Create(std::move(parent), std::move(source), nullptr, std::move(guard)));
  it->interrupt_ = std::move(interrupt);
  BatchIterator* self = it.get();
  it->reader_ = std::thread([self] { self->ReadAhead(); });
  return it;
}

BatchIterator::BatchIterator(std::shared_ptr<NDManager> parent, Source source, Ready ready,
                             Interrupt interrupt, std::unique_ptr<kernels::GpuResources> gpu)
    : parent_(std::move(parent)),
      source_(std::move(source)),
      ready_(std::move(ready)),
      interrupt_(std::move(interrupt)),
      gpu_(std::move(gpu)) {}

BatchIterator::~BatchIterator() { Stop(absl::OkStatus()); }

void BatchIterator::Stop(const absl::Status& why) {
  if (reader_.joinable()) {
    bool in_source = false;
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      in_source = in_source_;
      changed_.SignalAll();
    }
    // The reader starts no pull once it saw stopping_; one it is in must be made to
    // return, or the join below would wait for a client that may never send again.
    if (in_source && interrupt_ != nullptr) interrupt_(why);
    reader_.join();
  }
  if (stopped_) return;
  stopped_ = true;
  // An upload may still be queued on the stream: let it finish before its memory goes.
  FinishUpload().IgnoreError();
  Free(current_);
  Free(next_);
  std::deque<DeviceBatch> unread;
  {
    absl::MutexLock lock(&mu_);
    unread.swap(read_ahead_);
  }
  for (DeviceBatch& batch : unread) {
    std::optional<DeviceBatch> held(std::move(batch));
    Free(held);
  }
}

int BatchIterator::live_batches() const {
  absl::MutexLock lock(&mu_);
  return live_;
}

int BatchIterator::peak_live_batches() const {
  absl::MutexLock lock(&mu_);
  return peak_live_;
}

std::int64_t BatchIterator::batches_uploaded() const {
  absl::MutexLock lock(&mu_);
  return uploaded_;
}

void BatchIterator::Free(std::optional<DeviceBatch>& batch) {
  if (!batch.has_value()) return;
  batch->manager->Close().IgnoreError();
  batch.reset();
  absl::MutexLock lock(&mu_);
  --live_;
  changed_.SignalAll();
}

absl::StatusOr<DeviceBatch> BatchIterator::Upload(const HostBatch& host,
                                                  std::shared_ptr<void>* use) {
  if (guard_ != nullptr) {
    NDS_ASSIGN_OR_RETURN(*use, guard_());
  }
  std::int64_t index = 0;
  {
    absl::MutexLock lock(&mu_);
    index = uploaded_;
  }
  for (const HostTensor& t : host) NDS_RETURN_IF_ERROR(CheckTensor(t, index));

  DeviceBatch batch;
  batch.index = index;
  NDS_ASSIGN_OR_RETURN(batch.manager, parent_->NewSubManager(ManagerLevel::kBatch,
                                                             absl::StrCat("batch-data/", index)));
  {
    absl::MutexLock lock(&mu_);
    ++live_;
    if (live_ > peak_live_) peak_live_ = live_;
  }
  std::optional<DeviceBatch> made(std::move(batch));
  auto fail = [&](const absl::Status& status) {
    Free(made);
    return status;
  };
  for (const HostTensor& t : host) {
    absl::StatusOr<NDArray> array;
    if (gpu_ == nullptr) {
      // The CPU's "upload" is the copy into the pool: done here, nothing to overlap.
      array = made->manager->FromHost(t.shape, t.dtype, t.bytes, t.name);
    } else {
      array = made->manager->Create(t.shape, t.dtype, t.name);
      if (array.ok()) {
        absl::StatusOr<void*> dst = array->Data();
        absl::Status copied = dst.status();
        if (copied.ok()) {
          copied = CopyHostToDeviceOnStream(parent_->device(), *dst, t.bytes.data(), t.bytes.size(),
                                            gpu_->context().cuda_stream);
        }
        if (!copied.ok()) array = copied;
      }
    }
    if (!array.ok()) return fail(array.status());
    made->names.push_back(t.name);
    made->arrays.push_back(*std::move(array));
  }
  {
    absl::MutexLock lock(&mu_);
    ++uploaded_;
  }
  return *std::move(made);
}

absl::StatusOr<std::optional<DeviceBatch>> BatchIterator::StartUpload() {
  if (source_ended_) return std::optional<DeviceBatch>();
  absl::StatusOr<std::optional<HostBatch>> host = source_();
  if (!host.ok() || !host->has_value()) {
    source_ended_ = true;
    if (!host.ok()) return host.status();
    return std::optional<DeviceBatch>();
  }
  absl::StatusOr<DeviceBatch> uploaded = Upload(**host, &next_use_);
  // On the CPU the bytes landed in Upload; on a GPU they land by FinishUpload.
  if (!uploaded.ok() || gpu_ == nullptr) next_use_.reset();
  NDS_ASSIGN_OR_RETURN(DeviceBatch batch, std::move(uploaded));
  // The stream may read the host bytes until FinishUpload.
  next_host_ = **std::move(host);
  return std::optional<DeviceBatch>(std::move(batch));
}

absl::Status BatchIterator::FinishUpload() {
  absl::Status status = gpu_ != nullptr ? gpu_->Synchronize() : absl::OkStatus();
  next_host_.clear();
  next_use_.reset();
  return status;
}

void BatchIterator::ReadAhead() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      // Two batches at most: the step's and the one after it.
      while (!stopping_ && live_ >= 2) changed_.Wait(&mu_);
      if (stopping_) break;
      in_source_ = true;
    }
    absl::StatusOr<std::optional<HostBatch>> host = source_();
    {
      absl::MutexLock lock(&mu_);
      in_source_ = false;
      // Interrupted: what the pull returned is the interrupt's doing, not the source's.
      if (stopping_) break;
    }
    absl::Status failed;
    if (!host.ok()) {
      failed = host.status();
    } else if (!host->has_value()) {
      break;
    } else {
      std::shared_ptr<void> use;  // held until the bytes landed
      absl::StatusOr<DeviceBatch> batch = Upload(**host, &use);
      // This thread is the stream's only user in this mode: the step never waits for
      // the copy, and the host bytes live until it is done.
      if (batch.ok() && gpu_ != nullptr) {
        if (absl::Status synced = gpu_->Synchronize(); !synced.ok()) {
          std::optional<DeviceBatch> lost(*std::move(batch));
          Free(lost);
          batch = synced;
        }
      }
      if (batch.ok()) {
        absl::MutexLock lock(&mu_);
        read_ahead_.push_back(*std::move(batch));
        changed_.SignalAll();
        continue;
      }
      failed = batch.status();
    }
    absl::MutexLock lock(&mu_);
    reader_status_ = failed;
    break;
  }
  absl::MutexLock lock(&mu_);
  reader_done_ = true;
  changed_.SignalAll();
}

absl::StatusOr<const DeviceBatch*> BatchIterator::NextReadAhead() {
  // Step k is done: batch k goes, which lets the reader pull batch k+2.
  Free(current_);
  absl::MutexLock lock(&mu_);
  while (read_ahead_.empty() && !reader_done_) changed_.Wait(&mu_);
  if (!read_ahead_.empty()) {
    current_ = std::move(read_ahead_.front());
    read_ahead_.pop_front();
    return &*current_;
  }
  absl::Status failed = std::move(reader_status_);
  reader_status_ = absl::OkStatus();
  if (!failed.ok()) return failed;
  return nullptr;
}

absl::StatusOr<const DeviceBatch*> BatchIterator::Next() {
  if (stopped_) return nullptr;
  if (interrupt_ != nullptr) return NextReadAhead();
  // Step k is done: batch k goes before anything else is allocated.
  Free(current_);
  if (pull_pending_) {
    pull_pending_ = false;
    NDS_ASSIGN_OR_RETURN(next_, StartUpload());
  }
  if (!next_.has_value()) return nullptr;
  absl::Status uploaded = FinishUpload();
  if (!uploaded.ok()) {
    Free(next_);
    return uploaded;
  }
  current_ = std::move(next_);
  next_.reset();
  if (ready_ != nullptr && !source_ended_ && !ready_()) {
    pull_pending_ = true;
    return &*current_;
  }
  // Batch k+1's upload overlaps step k (which runs once this returns).
  absl::StatusOr<std::optional<DeviceBatch>> following = StartUpload();
  if (!following.ok()) return following.status();
  next_ = *std::move(following);
  return &*current_;
}

}  // namespace ndserve::engine
