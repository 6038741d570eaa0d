#ifndef NDSERVE_KERNELS_CPU_PARALLEL_H_
#define NDSERVE_KERNELS_CPU_PARALLEL_H_

// A parallel-for for the CPU kernels' own loops (im2col, depthwise conv, pooling,
// epilogues): one small process-wide pool of IntraOpThreads() - 1 workers plus the
// calling thread. It is sized by OpenBLAS's thread count so a kernel's loops use the
// cores a GEMM would, and never more (docs/design.md section 6).
//
// Rule: the body of a ParallelFor must not call BLAS. OpenBLAS runs its own threads per
// call; a GEMM inside a parallel region would put IntraOpThreads()^2 threads on the cores.
// Kernels alternate instead: a parallel region, then a (BLAS-threaded) GEMM, then the next.
// The one exception is a GEMM small enough that OpenBLAS runs it on the calling thread
// alone (kernels/cpu/gemm.cc: kBlasSingleThreadMacs), which adds no threads.
//
// Thread-safe: any number of threads (requests) may call ParallelFor at once; their chunks
// share the workers, and each caller works on its own chunks too, so a caller never
// waits on a worker busy with another caller's chunk without making progress itself.
// A ParallelFor inside a ParallelFor body runs inline on the calling thread.

#include <cstdint>

#include "absl/functional/function_ref.h"

namespace ndserve::kernels::cpu {

// Threads an intra-op loop may use: OpenBLAS's own count (OPENBLAS_NUM_THREADS, else its
// default, the core count), read once; at least 1.
int IntraOpThreads();

// Calls fn(begin, end) on disjoint chunks that cover [0, n), each at least `min_chunk`
// items long (except when n itself is shorter), on at most IntraOpThreads() threads, and
// returns when every chunk is done. With one thread, or n < 2 * min_chunk, it is a plain
// call fn(0, n). `fn` must not call BLAS (see above) and must not throw.
void ParallelFor(int64_t n, int64_t min_chunk, absl::FunctionRef<void(int64_t, int64_t)> fn);

}  // namespace ndserve::kernels::cpu

#endif  // NDSERVE_KERNELS_CPU_PARALLEL_H_
