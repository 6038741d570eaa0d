#include "memory/device_pools.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/logging.h"
#include "memory/cuda_allocator.h"

namespace ndserve {

DevicePools::DevicePools(MemoryConfig config, AllocatorFactory make_allocator)
    : config_(config),
      make_allocator_(make_allocator != nullptr ? std::move(make_allocator)
                                                : AllocatorFactory(&MakeDeviceAllocator)) {}

absl::StatusOr<Pool*> DevicePools::Get(Device device) {
  absl::MutexLock lock(&mu_);
  if (auto it = pools_.find(device); it != pools_.end()) return it->second.get();
  absl::StatusOr<std::unique_ptr<DeviceAllocator>> allocator = make_allocator_(device);
  if (!allocator.ok()) return allocator.status();
  if ((*allocator)->device() != device) {
    return absl::InternalError(absl::StrCat("the allocator made for ", device.ToString(),
                                            " reports ", (*allocator)->device().ToString()));
  }
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
