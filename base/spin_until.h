#ifndef NDSERVE_BASE_SPIN_UNTIL_H_
#define NDSERVE_BASE_SPIN_UNTIL_H_

// Polling before blocking, shared by the thread pools that do it (kernels/cpu/parallel.cc,
// server/worker_pool.cc): handing work to a blocked thread costs a wake-up, tens of
// microseconds on a virtual machine's idle vCPU, which a thread that is still polling
// does not pay.

#include <chrono>

namespace ndserve {

// Polls `ready` until it holds or `micros` have passed; true if it holds. With a budget of
// 0 it looks once. Between looks the core is told it is spinning (x86 PAUSE), and the
// clock is read only every 64 looks.
template <typename F>
bool SpinUntil(int micros, F ready) {
  if (micros <= 0) return ready();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(micros);
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    }
    if (std::chrono::steady_clock::now() > deadline) return false;
  }
}

}  // namespace ndserve

#endif  // NDSERVE_BASE_SPIN_UNTIL_H_
