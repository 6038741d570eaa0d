#ifndef NDSERVE_KERNELS_CPU_CHUNK_DEAL_H_
#define NDSERVE_KERNELS_CPU_CHUNK_DEAL_H_

// How one ParallelFor call (parallel.h) hands its chunks to the threads that run them.
// Each thread has a home range of the chunks: the caller range 0, pool worker w range w.
// A thread takes its own range front to back, then the last chunk of the fullest range
// left. On an idle machine a thread so covers the same part of the output in every call
// of the same size (the next request's run of a node, or the next node split the same
// way) and finds those lines in its own cache, where a vCPU reads what the other one
// wrote at a quarter of its own speed (docs/benchmark-history.md, "Zen 5"). A thread held
// up by other work still loses the tail of its range to the others chunk by chunk, as
// when every thread claimed the next chunk in order. Not thread-safe: the pool guards it.

#include <algorithm>
#include <cstdint>

namespace ndserve::kernels::cpu {

class ChunkDeal {
 public:
  // Threads past this many (a pool sized for a many-core host) get no range of their own
  // and only take what the others leave.
  static constexpr int kMaxHomes = 64;

  // `chunks` chunks over `threads` home ranges: range h is chunks
  // [h * chunks / homes, (h + 1) * chunks / homes), homes = min(threads, kMaxHomes).
  ChunkDeal(int chunks, int threads) : homes_(std::clamp(threads, 1, kMaxHomes)), left_(chunks) {
    for (int h = 0; h < homes_; ++h) {
      head_[h] = static_cast<int>(int64_t{h} * chunks / homes_);
      tail_[h] = static_cast<int>(int64_t{h + 1} * chunks / homes_);
    }
  }

  // Chunks nobody has taken yet.
  int left() const { return left_; }

  // A chunk for thread `home`: its range's next, else the fullest range's last.
  // Requires left() > 0.
  int Take(int home) {
    --left_;
    if (home >= 0 && home < homes_ && head_[home] < tail_[home]) return head_[home]++;
    int fullest = 0;
    for (int h = 1; h < homes_; ++h) {
      if (tail_[h] - head_[h] > tail_[fullest] - head_[fullest]) fullest = h;
    }
    return --tail_[fullest];
  }

 private:
  int homes_;
  int left_;
  // Range h's chunks not yet taken: [head_[h], tail_[h]). Only the first homes_ entries
  // are set or read: left unzeroed, since a deal is made on every ParallelFor call.
  int head_[kMaxHomes];
  int tail_[kMaxHomes];
};

}  // namespace ndserve::kernels::cpu

#endif  // NDSERVE_KERNELS_CPU_CHUNK_DEAL_H_
