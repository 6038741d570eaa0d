#ifndef NDSERVE_KERNELS_NMS_CANDIDATES_H_
#define NDSERVE_KERNELS_NMS_CANDIDATES_H_

// The host half of NonMaxSuppression that the CPU and CUDA kernels share: which boxes of
// one (batch, class) are candidates and in what order the greedy pass visits them, so both
// devices select the same boxes in the same order.

#include <cstdint>
#include <vector>

#include "kernels/attrs/detection.h"

namespace ndserve::kernels {

// Indices of the `n` boxes whose score passes the threshold (score > score_threshold, when
// there is one), by descending score, ties by ascending index. NaN scores (which pass only
// when there is no threshold) come last, by index, so the order is total.
void NmsCandidates(const float* scores, int64_t n, const NmsAttrs& a, std::vector<int64_t>* out);

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_NMS_CANDIDATES_H_
