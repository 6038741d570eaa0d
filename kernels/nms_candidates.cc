#include "kernels/nms_candidates.h"

#include <algorithm>
#include <cmath>

namespace ndserve::kernels {

void NmsCandidates(const float* scores, int64_t n, const NmsAttrs& a, std::vector<int64_t>* out) {
  out->clear();
  for (int64_t i = 0; i < n; ++i) {
    if (!a.has_score_threshold || scores[i] > a.score_threshold) out->push_back(i);
  }
  // A stable sort on the score alone would do, but NaN has no place in `>`; this
  // comparator is a strict weak order over every float.
  std::sort(out->begin(), out->end(), [scores](int64_t i, int64_t j) {
    const float si = scores[i], sj = scores[j];
    const bool ni = std::isnan(si), nj = std::isnan(sj);
    if (ni != nj) return nj;
    if (!ni && si != sj) return si > sj;
    return i < j;
  });
}

}  // namespace ndserve::kernels
