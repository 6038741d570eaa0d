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
    std::shared_ptr<NDManager> parent, Source source, Ready ready) {
  if (parent == nullptr) return absl::InvalidArgumentError("a batch iterator needs a parent scope");
  if (source == nullptr) return absl::InvalidArgumentError("a batch iterator needs a source");
  std::unique_ptr<kernels::GpuResources> gpu;
  if (parent->device().is_cuda()) {
    NDS_ASSIGN_OR_RETURN(gpu, kernels::GpuResources::Create(parent->device()));
  }
  return std::unique_ptr<BatchIterator>(
      new BatchIterator(std::move(parent), std::move(source), std::move(ready), std::move(gpu)));
}

BatchIterator::BatchIterator(std::shared_ptr<NDManager> parent, Source source, Ready ready,
                             std::unique_ptr<kernels::GpuResources> gpu)
    : parent_(std::move(parent)),
      source_(std::move(source)),
      ready_(std::move(ready)),
      gpu_(std::move(gpu)) {}

BatchIterator::~BatchIterator() {
  // An upload may still be queued on the stream: let it finish before its memory goes.
  FinishUpload().IgnoreError();
  Free(current_);
  Free(next_);
}

void BatchIterator::Free(std::optional<DeviceBatch>& batch) {
  if (!batch.has_value()) return;
  batch->manager->Close().IgnoreError();
  batch.reset();
  --live_;
}

absl::StatusOr<std::optional<DeviceBatch>> BatchIterator::StartUpload() {
  if (source_ended_) return std::optional<DeviceBatch>();
  absl::StatusOr<std::optional<HostBatch>> host = source_();
  if (!host.ok() || !host->has_value()) {
    source_ended_ = true;
    if (!host.ok()) return host.status();
    return std::optional<DeviceBatch>();
  }
  const std::int64_t index = uploaded_;
  for (const HostTensor& t : **host) NDS_RETURN_IF_ERROR(CheckTensor(t, index));

  DeviceBatch batch;
  batch.index = index;
  NDS_ASSIGN_OR_RETURN(batch.manager, parent_->NewSubManager(ManagerLevel::kBatch,
                                                             absl::StrCat("batch-data/", index)));
  ++live_;
  if (live_ > peak_live_) peak_live_ = live_;
  std::optional<DeviceBatch> made(std::move(batch));
  auto fail = [&](const absl::Status& status) {
    Free(made);
    return status;
  };
  for (const HostTensor& t : **host) {
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
  ++uploaded_;
  // The stream may read the host bytes until FinishUpload.
  next_host_ = **std::move(host);
  return made;
}

absl::Status BatchIterator::FinishUpload() {
  absl::Status status = gpu_ != nullptr ? gpu_->Synchronize() : absl::OkStatus();
  next_host_.clear();
  return status;
}

absl::StatusOr<const DeviceBatch*> BatchIterator::Next() {
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
