#ifndef NDSERVE_MEMORY_BLOCK_H_
#define NDSERVE_MEMORY_BLOCK_H_

#include <cstddef>

namespace ndserve {

// A piece of device memory handed out by a Pool. A plain value: whoever received it
// from Pool::Allocate must pass it, unchanged, to Pool::Free exactly once.
struct Block {
  void* ptr = nullptr;
  std::size_t requested = 0;  // bytes the caller asked for
  std::size_t size = 0;       // bytes set aside for it (after the pool's rounding)
  void* handle = nullptr;     // pool-private bookkeeping (e.g. the split pool's node)

  bool empty() const { return ptr == nullptr; }
};

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_BLOCK_H_
