#include "kernels/cpu/parallel_spin.h"

#include <algorithm>
#include <atomic>

namespace ndserve::kernels::cpu {
namespace {

std::atomic<int> spin_micros{kDefaultParallelSpinMicros};

}  // namespace

void SetParallelSpinMicros(int micros) {
  spin_micros.store(std::clamp(micros, 0, kMaxParallelSpinMicros), std::memory_order_relaxed);
}

int ParallelSpinMicros() { return spin_micros.load(std::memory_order_relaxed); }

}  // namespace ndserve::kernels::cpu
