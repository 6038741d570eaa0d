#include "memory/device_pools.h"

#include <algorithm>

#include "base/logging.h"
#include "memory/cuda_allocator.h"

namespace ndserve {

absl::StatusOr<Pool*> DevicePools::Get(Device device) {
  absl::MutexLock lock(&mu_);
  if (auto it = pools_.find(device); it != pools_.end()) return it->second.get();
  absl::StatusOr<std::unique_ptr<DeviceAllocator>> allocator = MakeDeviceAllocator(device);
  if (!allocator.ok()) return allocator.status();
  PoolOptions options;
  options.limit_bytes = config_.limit.Resolve((*allocator)->TotalBytes());
  options.debug_level = config_.debug_level;
  options.thread_cache_bytes = config_.thread_cache_bytes;
  std::unique_ptr<Pool> pool = MakePool(config_.pool, std::move(*allocator), options);
  LOG(INFO) << "memory pool '" << pool->name() << "' on " << device.ToString() << ", limit "
            << (options.limit_bytes == kNoLimit ? std::string("none")
                                                : FormatBytes(options.limit_bytes))
            << ", debug level " << options.debug_level << ", thread caches "
            << (config_.pool == PoolKind::kBinned && options.debug_level == 0 &&
                        options.thread_cache_bytes > 0
                    ? FormatBytes(options.thread_cache_bytes) + " per thread"
                    : std::string("off"));
  Pool* raw = pool.get();
  pools_.emplace(device, std::move(pool));
  return raw;
}

std::vector<Pool*> DevicePools::All() const {
  std::vector<Pool*> out;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [device, pool] : pools_) out.push_back(pool.get());
  }
  std::sort(out.begin(), out.end(),
            [](const Pool* a, const Pool* b) { return a->device() < b->device(); });
  return out;
}

}  // namespace ndserve
