#include "memory/binned_pool.h"
#include "memory/none_pool.h"
#include "memory/pool.h"
#include "memory/simple_pool.h"
#include "memory/split_pool.h"

namespace ndserve {

std::unique_ptr<Pool> MakePool(PoolKind kind, std::unique_ptr<DeviceAllocator> allocator,
                               PoolOptions options) {
  switch (kind) {
    case PoolKind::kBinned:
      return std::make_unique<BinnedPool>(std::move(allocator), options);
    case PoolKind::kSplit:
      return std::make_unique<SplitPool>(std::move(allocator), options);
    case PoolKind::kSimple:
      return std::make_unique<SimplePool>(std::move(allocator), options);
    case PoolKind::kNone:
      return std::make_unique<NonePool>(std::move(allocator), options);
  }
  return nullptr;
}

}  // namespace ndserve
