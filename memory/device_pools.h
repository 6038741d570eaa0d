#ifndef NDSERVE_MEMORY_DEVICE_POOLS_H_
#define NDSERVE_MEMORY_DEVICE_POOLS_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "memory/device.h"
#include "memory/device_allocator.h"
#include "memory/memory_config.h"
#include "memory/pool.h"

namespace ndserve {

// One pool per device, of the kind and limit the MemoryConfig names, made on first
// use: cpu:0, each cuda:N, and each cuda_host:N (the pinned staging memory of GPU N,
// docs/design.md §4.3). Owns the pools; pointers it hands out live as long as it does.
// A MemorySystem (memory_system.h) holds one next to the managers that allocate from
// it; tests of the pools alone may build one directly. Thread-safe.
class DevicePools {
 public:
  // Where a new pool's memory comes from; MakeDeviceAllocator unless a test stands
  // host memory in for devices this machine lacks.
  using AllocatorFactory =
      std::function<absl::StatusOr<std::unique_ptr<DeviceAllocator>>(Device)>;

  explicit DevicePools(MemoryConfig config, AllocatorFactory make_allocator = nullptr);

  // FAILED_PRECONDITION for a CUDA device (or the pinned memory of one) that is not
  // present.
  absl::StatusOr<Pool*> Get(Device device);
  // Every pool made so far, in device order.
  std::vector<Pool*> All() const;
  const MemoryConfig& config() const { return config_; }

 private:
  const MemoryConfig config_;
  const AllocatorFactory make_allocator_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<Device, std::unique_ptr<Pool>> pools_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_DEVICE_POOLS_H_
