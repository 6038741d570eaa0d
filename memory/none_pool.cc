#include "memory/none_pool.h"

namespace ndserve {

NonePool::NonePool(std::unique_ptr<DeviceAllocator> allocator, PoolOptions options)
    : Pool(PoolKind::kNone, std::move(allocator), options) {}

}  // namespace ndserve
