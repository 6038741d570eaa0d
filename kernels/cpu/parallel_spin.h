#ifndef NDSERVE_KERNELS_CPU_PARALLEL_SPIN_H_
#define NDSERVE_KERNELS_CPU_PARALLEL_SPIN_H_

// How long the intra-op pool (kernels/cpu/parallel.h) polls before it blocks: its idle
// workers for the next job, a caller for its job's last chunk. Polling saves a thread
// wake-up (tens of microseconds on a VM's vCPU) between the short parallel regions of one
// request; on a daemon whose cores are all busy with requests, the same polling takes CPU
// from threads with work (docs/design.md section 6). The daemon sets it from
// --intra_op_spin_us / NDSERVE_INTRA_OP_SPIN_US (server/options.h).

namespace ndserve::kernels::cpu {

inline constexpr int kDefaultParallelSpinMicros = 200;
// The most SetParallelSpinMicros keeps: a longer poll is a busy core, not a saved wake-up.
inline constexpr int kMaxParallelSpinMicros = 100000;

// Process-wide, from any thread at any time; a wait that has begun keeps its budget.
// Clamped to [0, kMaxParallelSpinMicros]; 0: block at once, never poll.
void SetParallelSpinMicros(int micros);
int ParallelSpinMicros();

}  // namespace ndserve::kernels::cpu

#endif  // NDSERVE_KERNELS_CPU_PARALLEL_SPIN_H_
