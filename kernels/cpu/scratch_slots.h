#ifndef NDSERVE_KERNELS_CPU_SCRATCH_SLOTS_H_
#define NDSERVE_KERNELS_CPU_SCRATCH_SLOTS_H_

// Per-thread scratch within one ParallelFor: a kernel allocates Count() equal blocks of
// request scratch up front and each chunk claims one for as long as it runs. At most
// Count() threads run one ParallelFor's chunks at once (its workers and its caller), so
// a block is free or about to be. Used by PackedGemm and DirectConv (docs/design.md §4.4).

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>

#include "kernels/cpu/parallel.h"

namespace ndserve::kernels::cpu {

class ScratchSlots {
 public:
  // Blocks to allocate: one per thread that may work at once (a bit each in a mask).
  static int Count() { return std::min(IntraOpThreads(), 64); }

  int Claim() {
    const int slots = Count();
    for (;;) {
      uint64_t mask = busy_.load(std::memory_order_relaxed);
      for (int s = 0; s < slots; ++s) {
        const uint64_t bit = uint64_t{1} << s;
        if ((mask & bit) == 0 && busy_.compare_exchange_weak(mask, mask | bit)) return s;
      }
      std::this_thread::yield();
    }
  }
  void Release(int slot) { busy_.fetch_and(~(uint64_t{1} << slot)); }

 private:
  std::atomic<uint64_t> busy_{0};
};

}  // namespace ndserve::kernels::cpu

#endif  // NDSERVE_KERNELS_CPU_SCRATCH_SLOTS_H_
