// NonMaxSuppression and RoiAlign on CUDA (kernels in detection.cu).
//
// NonMaxSuppression splits as torchvision's CUDA nms does: the device computes, for each
// (batch, class), the bitmask of which score-ordered candidate suppresses which (one
// block per 64 x 64 tile, the part that is candidates² work), and the host does what is
// sequential or small: the score filter and sort (kernels/nms_candidates.h, shared with
// the CPU kernel, so both visit candidates in the same order), and the greedy pass over
// the mask. The output's row count depends on that pass, so the op synchronizes its
// stream twice (after reading the scores and after the mask) before it can allocate its
// output (kOpDataShape, ops.def); the rows are then copied up. The mask costs n² / 8
// bytes of scratch for n candidates of one (batch, class) (3 MB for 5000).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/error_flag.h"
#include "kernels/cuda/detection_launchers.h"
#include "kernels/nms_candidates.h"

namespace ndserve::kernels::gpu {
namespace {

absl::StatusOr<void*> Scratch(const KernelContext& ctx, std::size_t bytes) {
  if (ctx.scratch == nullptr) {
    return absl::FailedPreconditionError("NonMaxSuppression: needs a scratch allocator");
  }
  return ctx.scratch->Allocate(bytes);
}

}  // namespace

absl::Status NonMaxSuppression(const KernelContext& ctx, absl::Span<const TensorView> in,
                               absl::Span<const TensorView>, const OpAttrs& attrs) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const NmsAttrs& a = std::get<NmsAttrs>(attrs);
  const int64_t batches = in[0].shape[0], n = in[0].shape[1], classes = in[1].shape[1];
  const int64_t groups = batches * classes;
  std::vector<int64_t> rows;  // (batch, class, box) triples
  if (a.max_per_class > 0 && n > 0 && groups > 0) {
    if (n > INT32_MAX) {
      return absl::UnimplementedError(
          absl::StrCat("NonMaxSuppression: CUDA kernel supports up to 2^31 - 1 boxes, got ", n));
    }
    const cudaStream_t stream = StreamOf(ctx);
    std::vector<float> scores(in[1].numel());
    NDS_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(scores.data(), in[1].data, in[1].nbytes(),
                                                   cudaMemcpyDeviceToHost, stream),
                                   "NonMaxSuppression scores cudaMemcpyAsync"));
    NDS_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream),
                                   "NonMaxSuppression cudaStreamSynchronize"));
    // Every group's candidates, concatenated; group g's run from first[g], and its mask
    // rows (words[g] words each) from mask_at[g].
    std::vector<int32_t> order;
    std::vector<int64_t> first(groups + 1, 0), words(groups), mask_at(groups + 1, 0);
    std::vector<int64_t> candidates;
    for (int64_t g = 0; g < groups; ++g) {
      NmsCandidates(scores.data() + g * n, n, a, &candidates);
      order.insert(order.end(), candidates.begin(), candidates.end());
      const int64_t m = static_cast<int64_t>(candidates.size());
      first[g + 1] = first[g] + m;
      words[g] = (m + kNmsMaskBits - 1) / kNmsMaskBits;
      mask_at[g + 1] = mask_at[g] + m * words[g];
    }
    if (!order.empty()) {
      NDS_ASSIGN_OR_RETURN(void* order_dev, Scratch(ctx, order.size() * sizeof(int32_t)));
      NDS_ASSIGN_OR_RETURN(void* mask_dev, Scratch(ctx, mask_at[groups] * sizeof(uint64_t)));
      // A copy from pageable memory is staged before the call returns, so `order` may go.
      NDS_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(order_dev, order.data(),
                                                     order.size() * sizeof(int32_t),
                                                     cudaMemcpyHostToDevice, stream),
                                     "NonMaxSuppression order cudaMemcpyAsync"));
      const int32_t* order_d = static_cast<const int32_t*>(order_dev);
      uint64_t* mask_d = static_cast<uint64_t*>(mask_dev);
      for (int64_t g = 0; g < groups; ++g) {
        const float* boxes = in[0].as<const float>() + (g / classes) * n * 4;
        NDS_RETURN_IF_ERROR(CudaStatus(
            LaunchNmsMask(boxes, order_d + first[g], first[g + 1] - first[g],
                          a.center_point_box, a.iou_threshold, mask_d + mask_at[g], stream),
            "NonMaxSuppression mask launch"));
      }
      std::vector<uint64_t> mask(mask_at[groups]);
      NDS_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(mask.data(), mask_d,
                                                     mask.size() * sizeof(uint64_t),
                                                     cudaMemcpyDeviceToHost, stream),
                                     "NonMaxSuppression mask cudaMemcpyAsync"));
      NDS_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream),
                                     "NonMaxSuppression cudaStreamSynchronize"));
      // The greedy pass: `removed` collects the rows of the candidates kept so far.
      std::vector<uint64_t> removed;
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t m = first[g + 1] - first[g], wg = words[g];
        removed.assign(wg, 0);
        int64_t kept = 0;
        for (int64_t i = 0; i < m && kept < a.max_per_class; ++i) {
          const int64_t word = i / kNmsMaskBits;
          if ((removed[word] >> (i % kNmsMaskBits)) & 1) continue;
          ++kept;
          rows.insert(rows.end(), {g / classes, g % classes, int64_t{order[first[g] + i]}});
          const uint64_t* row = mask.data() + mask_at[g] + i * wg;
          for (int64_t k = word; k < wg; ++k) removed[k] |= row[k];
        }
      }
    }
  }
  const int64_t selected = static_cast<int64_t>(rows.size() / 3);
  NDS_ASSIGN_OR_RETURN(TensorView out, ctx.outputs->Allocate(0, Shape{selected, 3}));
  if (rows.empty()) return absl::OkStatus();
  // Staged before the call returns (pageable source), so `rows` may go with this frame.
  return CudaStatus(cudaMemcpyAsync(out.data, rows.data(), rows.size() * sizeof(int64_t),
                                    cudaMemcpyHostToDevice, StreamOf(ctx)),
                    "NonMaxSuppression output cudaMemcpyAsync");
}

absl::Status RoiAlign(const KernelContext& ctx, absl::Span<const TensorView> in,
                      absl::Span<const TensorView> out, const OpAttrs& attrs) {
  NDS_RETURN_IF_ERROR(RequireErrorFlag(ctx, "RoiAlign"));
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const RoiAlignAttrs& at = std::get<RoiAlignAttrs>(attrs);
  RoiAlignArgs a;
  a.n = in[0].shape[0];
  a.c = in[0].shape[1];
  a.h = in[0].shape[2];
  a.w = in[0].shape[3];
  a.rois = in[1].shape[0];
  a.out_h = at.output_height;
  a.out_w = at.output_width;
  a.sampling_ratio = at.sampling_ratio;
  a.spatial_scale = at.spatial_scale;
  a.half_pixel = at.half_pixel;
  a.max_mode = at.max_mode;
  a.int64_indices = in[2].dtype == DType::kInt64;
  if (out[0].numel() == 0) return absl::OkStatus();
  ClearErrorFlag(ctx);
  NDS_RETURN_IF_ERROR(CudaStatus(LaunchRoiAlign(in[0].as<const float>(), in[1].as<const float>(),
                                                in[2].data, out[0].as<float>(), a,
                                                ctx.error_flag, StreamOf(ctx)),
                                 "RoiAlign launch"));
  return CheckErrorFlag(ctx, "RoiAlign",
                        absl::StrCat("a value of batch_indices is out of range [0, ", a.n,
                                     ") for X of batch ", a.n));
}

}  // namespace ndserve::kernels::gpu
