// CUDA entry points of the conv family: plan on the host with conv_geometry.h, then queue
// the conv_launchers.h kernels and cuBLAS GEMMs on the context's stream. Conv im2col's
// each image into request scratch and multiplies all groups in one strided-batched SGEMM
// (row-major Y_g = W_g col_g is the column-major col_g^T W_g^T, as in gemm.cc); the
// depthwise case is a direct kernel. A fused activation is the depthwise kernel's epilogue,
// and one elementwise pass after the GEMMs otherwise. ConvTranspose is a GEMM into scratch plus
// col2im.
#include <cublas_v2.h>

#include <climits>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "kernels/conv_geometry.h"
#include "kernels/cuda/conv_launchers.h"
#include "kernels/cuda/cublas_util.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/resize_plan.h"

namespace ndserve::kernels::gpu {
namespace {

absl::StatusOr<float*> Scratch(absl::string_view op, const KernelContext& ctx, int64_t floats) {
  if (ctx.scratch == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(op, ": the kernel context has no scratch allocator"));
  }
  NDS_ASSIGN_OR_RETURN(void* p, ctx.scratch->Allocate(floats * sizeof(float)));
  return static_cast<float*>(p);
}

// Image = X, window positions = Y (Conv and pooling).
ConvWindowArgs ForwardWindow(const ConvGeometry& g, int64_t channels) {
  ConvWindowArgs w;
  w.channels = channels;
  w.img_d = g.in_d, w.img_h = g.in_h, w.img_w = g.in_w;
  w.col_d = g.out_d, w.col_h = g.out_h, w.col_w = g.out_w;
  w.kd = g.k_d, w.kh = g.k_h, w.kw = g.k_w;
  w.sd = g.stride_d, w.sh = g.stride_h, w.sw = g.stride_w;
  w.dd = g.dil_d, w.dh = g.dil_h, w.dw = g.dil_w;
  w.pf = g.pad_front, w.pt = g.pad_top, w.pl = g.pad_left;
  w.pk = g.pad_back, w.pb = g.pad_bottom, w.pr = g.pad_right;
  return w;
}

// Image = Y, window positions = X (ConvTranspose's col2im).
ConvWindowArgs TransposeWindow(const ConvGeometry& g, int64_t channels) {
  ConvWindowArgs w = ForwardWindow(g, channels);
  w.img_d = g.out_d, w.img_h = g.out_h, w.img_w = g.out_w;
  w.col_d = g.in_d, w.col_h = g.in_h, w.col_w = g.in_w;
  return w;
}

}  // namespace

absl::Status Conv(const KernelContext& ctx, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const ConvAttrs& a = std::get<ConvAttrs>(attrs);
  const ShapeSpan xs = in[0].shape, ws = in[1].shape;
  NDS_ASSIGN_OR_RETURN(const ConvGeometry g,
                       MakeConvGeometry("Conv", a, xs.subspan(2), ws.subspan(2), false));
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const int64_t n = xs[0], c = xs[1], m = ws[0], groups = a.group;
  const int64_t cg = c / groups, mg = m / groups;
  const int64_t k = cg * g.k_plane(), p = g.out_plane();
  const float* x = in[0].as<const float>();
  const float* wt = in[1].as<const float>();
  const float* bias = in.size() > 2 ? in[2].as<const float>() : nullptr;
  float* y = out[0].as<float>();
  if (out[0].numel() == 0) return absl::OkStatus();
  const cudaStream_t stream = StreamOf(ctx);
  if (cg == 1 && groups > 1) {
    return CudaStatus(
        LaunchDepthwiseConv(x, wt, bias, y, n, mg, ForwardWindow(g, c), a.activation, stream),
        "Conv depthwise launch");
  }
  NDS_RETURN_IF_ERROR(
      CudaStatus(LaunchFillChannelBias(bias, y, n, m, p, stream), "Conv bias launch"));
  // The fused activation (if any) runs once over Y after every image's GEMM; stream order
  // puts it behind them.
  const int64_t y_count = n * m * p;
  if (k == 0) {
    return CudaStatus(LaunchConvActivation(y, y_count, a.activation, stream),
                      "Conv activation launch");
  }
  NDS_RETURN_IF_ERROR(CheckIntDims("Conv", mg, p, k));
  if (groups > INT_MAX) return absl::UnimplementedError("Conv: too many groups for cuBLAS");
  NDS_ASSIGN_OR_RETURN(cublasHandle_t handle, HandleOf("Conv", ctx));
  const bool pointwise = g.IsPointwise();
  float* col = nullptr;
  if (!pointwise) {
    NDS_ASSIGN_OR_RETURN(col, Scratch("Conv", ctx, groups * k * p));
  }
  const float one = 1.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float* xi = x + i * c * g.in_plane();
    const float* b = xi;
    if (!pointwise) {
      // Stream order keeps the next image's im2col behind this image's GEMM.
      NDS_RETURN_IF_ERROR(
          CudaStatus(LaunchIm2Col(xi, ForwardWindow(g, c), col, stream), "Conv im2col launch"));
      b = col;
    }
    NDS_RETURN_IF_ERROR(CublasStatus(
        cublasSgemmStridedBatched(
            handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(p), static_cast<int>(mg),
            static_cast<int>(k), &one, b, static_cast<int>(p), k * p, wt, static_cast<int>(k),
            mg * k, &one, y + i * m * p, static_cast<int>(p), mg * p, static_cast<int>(groups)),
        "Conv cublasSgemmStridedBatched"));
  }
  return CudaStatus(LaunchConvActivation(y, y_count, a.activation, stream),
                    "Conv activation launch");
}

absl::Status ConvTranspose(const KernelContext& ctx, absl::Span<const TensorView> in,
                           absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const ConvAttrs& a = std::get<ConvAttrs>(attrs);
  const ShapeSpan xs = in[0].shape, ws = in[1].shape;
  NDS_ASSIGN_OR_RETURN(const ConvGeometry g,
                       MakeConvGeometry("ConvTranspose", a, xs.subspan(2), ws.subspan(2), true));
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const int64_t n = xs[0], c = xs[1], groups = a.group;
  const int64_t cg = c / groups, mg = ws[1], m = mg * groups;
  const int64_t k = mg * g.k_plane(), p = g.in_plane();
  const float* x = in[0].as<const float>();
  const float* wt = in[1].as<const float>();
  const float* bias = in.size() > 2 ? in[2].as<const float>() : nullptr;
  float* y = out[0].as<float>();
  if (out[0].numel() == 0) return absl::OkStatus();
  const cudaStream_t stream = StreamOf(ctx);
  NDS_RETURN_IF_ERROR(CudaStatus(LaunchFillChannelBias(bias, y, n, m, g.out_plane(), stream),
                                 "ConvTranspose bias launch"));
  if (cg == 0 || p == 0) return absl::OkStatus();
  NDS_RETURN_IF_ERROR(CheckIntDims("ConvTranspose", k, p, cg));
  NDS_ASSIGN_OR_RETURN(cublasHandle_t handle, HandleOf("ConvTranspose", ctx));
  NDS_ASSIGN_OR_RETURN(float* col, Scratch("ConvTranspose", ctx, k * p));
  const ConvWindowArgs w = TransposeWindow(g, mg);
  const float one = 1.0f, zero = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t gi = 0; gi < groups; ++gi) {
      // Row-major col [k x p] = W_g^T x_g, i.e. column-major col^T = x_g^T W_g.
      NDS_RETURN_IF_ERROR(CublasStatus(
          cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_T, static_cast<int>(p), static_cast<int>(k),
                      static_cast<int>(cg), &one, x + (i * c + gi * cg) * p, static_cast<int>(p),
                      wt + gi * cg * k, static_cast<int>(k), &zero, col, static_cast<int>(p)),
          "ConvTranspose cublasSgemm"));
      NDS_RETURN_IF_ERROR(
          CudaStatus(LaunchCol2Im(col, w, y + (i * m + gi * mg) * g.out_plane(), stream),
                     "ConvTranspose col2im launch"));
    }
  }
  return absl::OkStatus();
}

absl::Status MaxPool(const KernelContext& ctx, absl::Span<const TensorView> in,
                     absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const ShapeSpan xs = in[0].shape;
  NDS_ASSIGN_OR_RETURN(const ConvGeometry g,
                       MakePoolGeometry("MaxPool", std::get<PoolAttrs>(attrs), xs.subspan(2)));
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  int64_t* indices = out.size() > 1 ? out[1].as<int64_t>() : nullptr;
  return CudaStatus(LaunchMaxPool(in[0].as<const float>(), out[0].as<float>(), indices,
                                  xs[0] * xs[1], ForwardWindow(g, 1), StreamOf(ctx)),
                    "MaxPool launch");
}

absl::Status AveragePool(const KernelContext& ctx, absl::Span<const TensorView> in,
                         absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const PoolAttrs& a = std::get<PoolAttrs>(attrs);
  const ShapeSpan xs = in[0].shape;
  NDS_ASSIGN_OR_RETURN(const ConvGeometry g, MakePoolGeometry("AveragePool", a, xs.subspan(2)));
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  return CudaStatus(LaunchAveragePool(in[0].as<const float>(), out[0].as<float>(), xs[0] * xs[1],
                                      ForwardWindow(g, 1), a.count_include_pad, StreamOf(ctx)),
                    "AveragePool launch");
}

absl::Status GlobalAveragePool(const KernelContext& ctx, absl::Span<const TensorView> in,
                               absl::Span<const TensorView> out, const OpAttrs&) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const int64_t planes = in[0].shape[0] * in[0].shape[1];
  return CudaStatus(
      LaunchGlobalPool(in[0].as<const float>(), out[0].as<float>(), planes,
                       planes == 0 ? 0 : in[0].numel() / planes, false, StreamOf(ctx)),
      "GlobalAveragePool launch");
}

absl::Status GlobalMaxPool(const KernelContext& ctx, absl::Span<const TensorView> in,
                           absl::Span<const TensorView> out, const OpAttrs&) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const int64_t planes = in[0].shape[0] * in[0].shape[1];
  return CudaStatus(LaunchGlobalPool(in[0].as<const float>(), out[0].as<float>(), planes,
                                     planes == 0 ? 0 : in[0].numel() / planes, true, StreamOf(ctx)),
                    "GlobalMaxPool launch");
}

absl::Status BatchNormalization(const KernelContext& ctx, absl::Span<const TensorView> in,
                                absl::Span<const TensorView> out, const OpAttrs& attrs) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const int64_t n = in[0].shape[0], c = in[0].shape[1];
  const int64_t inner = n * c == 0 ? 0 : in[0].numel() / (n * c);
  return CudaStatus(
      LaunchBatchNorm(in[0].as<const float>(), in[1].as<const float>(), in[2].as<const float>(),
                      in[3].as<const float>(), in[4].as<const float>(), out[0].as<float>(), n, c,
                      inner, std::get<BatchNormAttrs>(attrs).epsilon, StreamOf(ctx)),
      "BatchNormalization launch");
}

absl::Status InstanceNormalization(const KernelContext& ctx, absl::Span<const TensorView> in,
                                   absl::Span<const TensorView> out, const OpAttrs& attrs) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const int64_t n = in[0].shape[0], c = in[0].shape[1];
  const int64_t inner = n * c == 0 ? 0 : in[0].numel() / (n * c);
  return CudaStatus(LaunchInstanceNorm(in[0].as<const float>(), in[1].as<const float>(),
                                       in[2].as<const float>(), out[0].as<float>(), n, c, inner,
                                       std::get<BatchNormAttrs>(attrs).epsilon, StreamOf(ctx)),
                    "InstanceNormalization launch");
}

absl::Status Resize(const KernelContext& ctx, absl::Span<const TensorView> in,
                    absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const ResizeAttrs& a = std::get<ResizeAttrs>(attrs);
  NDS_ASSIGN_OR_RETURN(const ResizePlan p, MakeResizePlan(a, in[0].shape));
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  if (IsIdentityResize(p)) {
    if (in[0].nbytes() == 0) return absl::OkStatus();
    return CudaStatus(cudaMemcpyAsync(out[0].data, in[0].data, in[0].nbytes(),
                                      cudaMemcpyDeviceToDevice, StreamOf(ctx)),
                      "Resize cudaMemcpyAsync");
  }
  ResizeArgs args;
  args.planes = p.planes;
  args.in_d = p.in_d, args.in_h = p.in_h, args.in_w = p.in_w;
  args.out_d = p.out_d, args.out_h = p.out_h, args.out_w = p.out_w;
  args.scale_d = p.scale_d, args.scale_h = p.scale_h, args.scale_w = p.scale_w;
  args.depth = p.depth;
  args.mode = static_cast<int>(a.mode);
  args.cubic_a = a.cubic_a;
  args.exclude_outside = a.exclude_outside;
  args.coord = static_cast<int>(a.coord);
  args.nearest = static_cast<int>(a.nearest);
  return CudaStatus(LaunchResize(in[0].as<const float>(), out[0].as<float>(), args, StreamOf(ctx)),
                    "Resize launch");
}

absl::Status GridSample(const KernelContext& ctx, absl::Span<const TensorView> in,
                        absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const GridSampleAttrs& a = std::get<GridSampleAttrs>(attrs);
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  GridSampleArgs args;
  args.n = in[0].shape[0], args.c = in[0].shape[1];
  args.in_h = in[0].shape[2], args.in_w = in[0].shape[3];
  args.out_h = in[1].shape[1], args.out_w = in[1].shape[2];
  args.mode = static_cast<int>(a.mode);
  args.padding = static_cast<int>(a.padding);
  args.align_corners = a.align_corners;
  return CudaStatus(LaunchGridSample(in[0].as<const float>(), in[1].as<const float>(),
                                     out[0].as<float>(), args, StreamOf(ctx)),
                    "GridSample launch");
}

}  // namespace ndserve::kernels::gpu
