#ifndef NDSERVE_KERNELS_CPU_ISA_CLONES_H_
#define NDSERVE_KERNELS_CPU_ISA_CLONES_H_

// NDS_CPU_CLONES before a hot loop's function: on x86-64 GCC compiles it twice, for
// AVX2 + FMA (x86-64-v3) and for the baseline, and picks one when the program loads
// (function multiversioning through an ifunc). The rest of the kernels stay baseline, so
// one binary runs on any x86-64 while its inner loops use 8-wide registers where the CPU
// has them (docs/design.md section 4). Functions it inlines (lane_math.h) are compiled
// into each clone.
//
// NDS_CPU_CLONES_V4 adds a third clone for x86-64-v4 (AVX-512), for loops that measured
// faster there: its 32 vector registers hold what the AVX2 clone spills (the depthwise
// conv's stride-2 rows, 237-242 against 305-309 us for mobilenet_v2's 96 planes of
// 112x112 on one thread, benchmarks/depthwise_benchmark.cc).
#if defined(__x86_64__)
#define NDS_CPU_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#define NDS_CPU_CLONES_V4 \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define NDS_CPU_CLONES
#define NDS_CPU_CLONES_V4
#endif

#endif  // NDSERVE_KERNELS_CPU_ISA_CLONES_H_
