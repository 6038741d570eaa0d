#ifndef NDSERVE_MEMORY_DEVICE_COPY_H_
#define NDSERVE_MEMORY_DEVICE_COPY_H_

#include <cstddef>

#include "absl/status/status.h"
#include "memory/device.h"

namespace ndserve {

// Synchronous byte copies between host memory and memory of `device`. On the CPU device
// they are memcpy/memset; on CUDA, cudaMemcpy/cudaMemset on the default stream (which
// waits for work queued on it). FAILED_PRECONDITION for a CUDA device in a build or on a
// host without one; INTERNAL with CUDA's message if the copy fails. Zero bytes is a
// no-op. Thread-safe.
absl::Status CopyHostToDevice(Device device, void* device_dst, const void* host_src,
                              std::size_t bytes);
absl::Status CopyDeviceToHost(Device device, void* host_dst, const void* device_src,
                              std::size_t bytes);
absl::Status FillZero(Device device, void* device_dst, std::size_t bytes);

// The same copies ordered on `cuda_stream` (a cudaStream_t) instead of the default
// stream, for a request that runs on its own stream: no device-wide synchronization.
// Host to device: work queued on that stream afterwards sees the bytes; `host_src` must
// stay valid until that stream's work is done (with pageable memory the driver stages
// it before returning, but pinned memory is read later). Device to host: waits for the
// stream's earlier work and returns once the bytes are in `host_dst`. CPU devices copy
// at once; a null stream falls back to the synchronous copies above.
absl::Status CopyHostToDeviceOnStream(Device device, void* device_dst, const void* host_src,
                                      std::size_t bytes, void* cuda_stream);
absl::Status CopyDeviceToHostOnStream(Device device, void* host_dst, const void* device_src,
                                      std::size_t bytes, void* cuda_stream);

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_DEVICE_COPY_H_
