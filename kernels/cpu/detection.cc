// NonMaxSuppression and RoiAlign on the CPU, over the arithmetic the CUDA kernels share
// (kernels/detection_coord.h, kernels/nms_candidates.h). Semantics: kernels/attrs/detection.h.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/parallel.h"
#include "kernels/detection_coord.h"
#include "kernels/nms_candidates.h"

namespace ndserve::kernels::cpu {

// Greedy per (batch, class): each candidate, best score first, is kept unless a box kept
// before it overlaps it too much. Candidates are checked against the kept boxes only, so
// the cost is candidates x kept, not candidates².
absl::Status NonMaxSuppression(const KernelContext& ctx, absl::Span<const TensorView> in,
                               absl::Span<const TensorView>, const OpAttrs& attrs) {
  const NmsAttrs& a = std::get<NmsAttrs>(attrs);
  const int64_t batches = in[0].shape[0], n = in[0].shape[1], classes = in[1].shape[1];
  const float* boxes = in[0].as<const float>();
  const float* scores = in[1].as<const float>();
  std::vector<int64_t> rows;  // (batch, class, box) triples
  if (a.max_per_class > 0 && n > 0) {
    std::vector<NmsBox> decoded(n), kept;
    std::vector<int64_t> order;
    for (int64_t b = 0; b < batches; ++b) {
      for (int64_t i = 0; i < n; ++i) {
        decoded[i] = NmsDecodeBox(boxes + (b * n + i) * 4, a.center_point_box);
      }
      for (int64_t c = 0; c < classes; ++c) {
        NmsCandidates(scores + (b * classes + c) * n, n, a, &order);
        kept.clear();
        for (const int64_t i : order) {
          if (static_cast<int64_t>(kept.size()) >= a.max_per_class) break;
          bool suppressed = false;
          for (const NmsBox& k : kept) {
            if (NmsSuppresses(k, decoded[i], a.iou_threshold)) {
              suppressed = true;
              break;
            }
          }
          if (suppressed) continue;
          kept.push_back(decoded[i]);
          rows.insert(rows.end(), {b, c, i});
        }
      }
    }
  }
  const int64_t selected = static_cast<int64_t>(rows.size() / 3);
  NDS_ASSIGN_OR_RETURN(TensorView out, ctx.outputs->Allocate(0, Shape{selected, 3}));
  if (!rows.empty()) std::copy(rows.begin(), rows.end(), out.as<int64_t>());
  return absl::OkStatus();
}

// In parallel over (roi, channel) planes of the output. A chunk's planes are mostly
// channels of one roi, so it works out that roi's taps once (the ones the CUDA kernel works
// out per output element) and applies them to each channel; a roi with too many samples
// to hold goes sample by sample instead, with the same arithmetic.
absl::Status RoiAlign(const KernelContext&, absl::Span<const TensorView> in,
                      absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const RoiAlignAttrs& a = std::get<RoiAlignAttrs>(attrs);
  const int64_t n = in[0].shape[0], c = in[0].shape[1], h = in[0].shape[2], w = in[0].shape[3];
  const int64_t rois = in[1].shape[0];
  std::vector<int64_t> batch(rois);
  for (int64_t r = 0; r < rois; ++r) {
    batch[r] = in[2].dtype == DType::kInt64 ? in[2].as<const int64_t>()[r]
                                            : in[2].as<const int32_t>()[r];
    if (batch[r] < 0 || batch[r] >= n) {
      return absl::InvalidArgumentError(absl::StrCat("RoiAlign: batch_indices[", r, "] = ",
                                                     batch[r], " is out of range [0, ", n,
                                                     ") for X of batch ", n));
    }
  }
  const float* x = in[0].as<const float>();
  const float* box = in[1].as<const float>();
  float* y = out[0].as<float>();
  const int64_t oh = a.output_height, ow = a.output_width, bins = oh * ow;
  // About 4096 bins a chunk, so a few rois of 7 x 7 do not wake every thread.
  const int64_t min_chunk = bins >= 4096 ? 1 : 4096 / bins;
  constexpr int64_t kMaxHeldTaps = int64_t{1} << 16;  // 3.5 MB a thread
  ParallelFor(rois * c, min_chunk, [&](int64_t begin, int64_t end) {
    std::vector<RoiTaps> taps;
    int64_t taps_roi = -1;
    bool held = false;
    RoiAlignGeometry g{};
    for (int64_t p = begin; p < end; ++p) {
      const int64_t r = p / c;
      if (r != taps_roi) {
        taps_roi = r;
        g = RoiAlignGeometryOf(box + r * 4, a.spatial_scale, a.half_pixel, oh, ow,
                               a.sampling_ratio);
        const int64_t per_bin = g.grid_h * g.grid_w;
        held = per_bin <= kMaxHeldTaps / bins;
        if (held) {
          taps.resize(bins * per_bin);
          RoiTaps* t = taps.data();
          for (int64_t ph = 0; ph < oh; ++ph) {
            for (int64_t pw = 0; pw < ow; ++pw) {
              for (int64_t iy = 0; iy < g.grid_h; ++iy) {
                for (int64_t ix = 0; ix < g.grid_w; ++ix) {
                  *t++ = RoiAlignSampleTaps(g, ph, pw, iy, ix, h, w);
                }
              }
            }
          }
        }
      }
      const float* plane = x + (batch[r] * c + p % c) * h * w;
      float* dst = y + p * bins;
      if (!held) {
        for (int64_t bin = 0; bin < bins; ++bin) {
          dst[bin] = RoiAlignBin(plane, g, bin / ow, bin % ow, h, w, a.max_mode);
        }
        continue;
      }
      const RoiTaps* t = taps.data();
      for (int64_t bin = 0; bin < bins; ++bin) {
        RoiAlignAcc acc;
        for (int64_t s = 0; s < g.grid_h * g.grid_w; ++s) {
          RoiAlignFold(&acc, RoiAlignSampleValue(plane, *t++, a.max_mode), a.max_mode);
        }
        dst[bin] = RoiAlignResult(acc, g, a.max_mode);
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace ndserve::kernels::cpu
