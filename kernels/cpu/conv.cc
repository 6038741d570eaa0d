// Conv and ConvTranspose on the CPU. Conv: per image and group, im2col into request
// scratch and one cblas_sgemm (W_g [Mg x K] times col [K x P]); a 1x1 stride-1 unpadded
// conv reads X as the col matrix directly, and a depthwise conv (one input channel per
// group) is a direct loop (depthwise_conv.h), where a GEMM would have K = kh*kw and waste
// its blocking.
// A fused activation (ConvAttrs::activation) is applied to each band of output right
// after its GEMM, while the band is still in cache. im2col and the depthwise loop run on
// ParallelFor (parallel.h); the GEMMs on OpenBLAS's threads, never inside a parallel
// region. With one group and W packed at load (KernelContext::packed_weight), the GEMMs
// are PackedGemm's instead (packed_gemm.h), on ParallelFor's threads, with the bias and
// activation applied by its micro-kernel before each tile's store (HardSwish and Sigmoid
// per finished block after it; docs/design.md §4.4); and a packed conv
// that is not pointwise skips im2col and the fold altogether: the direct conv
// (direct_conv.h) reads the padded image in place (docs/design.md §4.4.1), or, for a 3x3
// stride-1 conv with a Winograd packing and enough tiles, winograd_conv.h (§4.4.2).
// ConvTranspose: col = W_g^T x_g by GEMM, then col2im scatters and accumulates col into Y.
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "kernels/conv_activation.h"
#include "kernels/conv_geometry.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/depthwise_conv.h"
#include "kernels/cpu/direct_conv.h"
#include "kernels/cpu/late_activation.h"
#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/winograd_conv.h"

namespace ndserve::kernels::cpu {
namespace {

// Most bytes of one band of the im2col matrix (see Conv).
constexpr int64_t kIm2ColBandBytes = int64_t{1} << 20;
// Most bytes of the col matrix of the images that share one GEMM (see FoldedConv).
constexpr int64_t kFoldedColBytes = int64_t{8} << 20;

// The window walk shared by im2col and col2im: an image of img_d x img_h x img_w pixels
// and a grid of col_d x col_h x col_w window positions; position (z, r, s), tap
// (kz, ki, kj) reads image pixel (z * sd - pf + kz * dd, r * sh - pt + ki * dh,
// s * sw - pl + kj * dw) when it lies inside the image. A 2-D conv has depth 1. The walks
// go by "rows": row R is the window positions (R / col_h, R % col_h, *), so a band of
// rows is a contiguous run of output whatever the rank.
struct Window {
  int64_t img_d, img_h, img_w, col_d, col_h, col_w, kd, kh, kw, sd, sh, sw, dd, dh, dw, pf, pt, pl;

  int64_t rows() const { return col_d * col_h; }
};

Window ConvWindow(const ConvGeometry& g) {  // image = X, positions = Y
  return {g.in_d,  g.in_h,  g.in_w,  g.out_d,     g.out_h,    g.out_w,
          g.k_d,   g.k_h,   g.k_w,   g.stride_d,  g.stride_h, g.stride_w,
          g.dil_d, g.dil_h, g.dil_w, g.pad_front, g.pad_top,  g.pad_left};
}
Window TransposeWindow(const ConvGeometry& g) {  // image = Y, positions = X
  return {g.out_d, g.out_h, g.out_w, g.in_d,      g.in_h,     g.in_w,
          g.k_d,   g.k_h,   g.k_w,   g.stride_d,  g.stride_h, g.stride_w,
          g.dil_d, g.dil_h, g.dil_w, g.pad_front, g.pad_top,  g.pad_left};
}

// Positions s in [0, n) with 0 <= s * stride + off < size: [*lo, *hi).
void ValidRange(int64_t off, int64_t stride, int64_t size, int64_t n, int64_t* lo, int64_t* hi) {
  // s >= ceil(-off / stride) and s < ceil((size - off) / stride).
  auto ceil_div = [](int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); };
  *lo = std::clamp<int64_t>(ceil_div(-off, stride), 0, n);
  *hi = std::clamp<int64_t>(ceil_div(size - off, stride), *lo, n);
}

// Walks window rows from `rr` on, and gives the image row (in units of img_w) each one
// reads at taps (kz, ki), or -1 where that row is in the padding. One division at the
// start, none per row: im2col's rows are often only a few dozen floats.
class RowWalk {
 public:
  RowWalk(const Window& w, int64_t rr, int64_t kz, int64_t ki)
      : w_(w),
        z_(rr / w.col_h),
        r_(rr % w.col_h),
        z_off_(kz * w.dd - w.pf),
        h_off_(ki * w.dh - w.pt) {}

  int64_t ImageRow() const {
    const int64_t iz = z_ * w_.sd + z_off_, ih = r_ * w_.sh + h_off_;
    if (iz < 0 || iz >= w_.img_d || ih < 0 || ih >= w_.img_h) return -1;
    return iz * w_.img_h + ih;
  }
  void Next() {
    if (++r_ == w_.col_h) {
      r_ = 0;
      ++z_;
    }
  }

 private:
  const Window& w_;
  int64_t z_, r_, z_off_, h_off_;
};

// Calls fn(c, tap, walk, off_w, lo, hi) for each of `channels` planes and each kernel tap
// (kz, ki, kj), tap = ((c * kd + kz) * kh + ki) * kw + kj being the col matrix's row:
// `walk` starts at window row r0, and window columns [lo, hi) read image column
// s * sw + off_w inside the image.
template <typename Fn>
void ForEachTap(const Window& w, int64_t channels, int64_t r0, Fn fn) {
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t kz = 0; kz < w.kd; ++kz) {
      for (int64_t ki = 0; ki < w.kh; ++ki) {
        for (int64_t kj = 0; kj < w.kw; ++kj) {
          const int64_t off_w = kj * w.dw - w.pl;
          int64_t lo, hi;
          ValidRange(off_w, w.sw, w.img_w, w.col_w, &lo, &hi);
          fn(c, ((c * w.kd + kz) * w.kh + ki) * w.kw + kj, RowWalk(w, r0, kz, ki), off_w, lo, hi);
        }
      }
    }
  }
}

// Whether the window grid is the image's own (stride 1 everywhere, as many positions as
// pixels: a "same" conv): then each tap's col row is the image shifted by one constant
// offset, with the positions whose pixel falls outside zeroed.
bool SameGrid(const Window& w) {
  return w.sd == 1 && w.sh == 1 && w.sw == 1 && w.col_d == w.img_d && w.col_h == w.img_h &&
         w.col_w == w.img_w;
}

// Im2Col for a SameGrid window: per tap, one copy of the shifted image run, then the
// padding positions zeroed row by row. A volume's rows are often a dozen floats, where a
// copy per row costs more than the row (unet3d_tiny's 16^3 convs).
void Im2ColSameGrid(const float* img, int64_t channels, const Window& w, int64_t r0, int64_t r1,
                    int64_t ld, float* col) {
  const int64_t plane = w.img_d * w.img_h * w.img_w;
  const int64_t begin = r0 * w.col_w, end = r1 * w.col_w;  // this tile's positions
  ForEachTap(w, channels, r0,
             [&](int64_t c, int64_t tap, RowWalk walk, int64_t off_w, int64_t lo, int64_t hi) {
               const float* xc = img + c * plane;
               float* row = col + tap * ld;
               // Position q reads pixel q + shift when that pixel is its window's.
               const int64_t kz = (tap / (w.kh * w.kw)) % w.kd, ki = (tap / w.kw) % w.kh;
               const int64_t shift =
                   ((kz * w.dd - w.pf) * w.img_h + (ki * w.dh - w.pt)) * w.img_w + off_w;
               const int64_t q0 = std::clamp<int64_t>(-shift, begin, end);
               const int64_t q1 = std::clamp<int64_t>(plane - shift, q0, end);
               std::fill(row, row + (q0 - begin), 0.0f);
               std::memcpy(row + (q0 - begin), xc + q0 + shift, (q1 - q0) * sizeof(float));
               std::fill(row + (q1 - begin), row + (end - begin), 0.0f);
               for (int64_t rr = r0; rr < r1; ++rr, row += w.col_w, walk.Next()) {
                 if (walk.ImageRow() < 0) {
                   std::fill(row, row + w.col_w, 0.0f);
                   continue;
                 }
                 for (int64_t s = 0; s < lo; ++s) row[s] = 0.0f;
                 for (int64_t s = hi; s < w.col_w; ++s) row[s] = 0.0f;
               }
             });
}

// col[tap][(R - r0) * col_w + s] = image pixel or 0, for `channels` planes and the
// window rows R in [r0, r1): one tile of the full col matrix, whose rows lie `ld` floats
// apart.
void Im2Col(const float* img, int64_t channels, const Window& w, int64_t r0, int64_t r1, int64_t ld,
            float* col) {
  if (SameGrid(w)) return Im2ColSameGrid(img, channels, w, r0, r1, ld, col);
  const int64_t plane = w.img_d * w.img_h * w.img_w;
  ForEachTap(w, channels, r0,
             [&](int64_t c, int64_t tap, RowWalk walk, int64_t off_w, int64_t lo, int64_t hi) {
               const float* xc = img + c * plane;
               float* row = col + tap * ld;
               for (int64_t rr = r0; rr < r1; ++rr, row += w.col_w, walk.Next()) {
                 const int64_t ir = walk.ImageRow();
                 if (ir < 0) {
                   std::fill(row, row + w.col_w, 0.0f);
                   continue;
                 }
                 const float* xr = xc + ir * w.img_w;
                 std::fill(row, row + lo, 0.0f);
                 if (w.sw == 1) {
                   std::memcpy(row + lo, xr + lo + off_w, (hi - lo) * sizeof(float));
                 } else {
                   for (int64_t s = lo; s < hi; ++s) row[s] = xr[s * w.sw + off_w];
                 }
                 std::fill(row + hi, row + w.col_w, 0.0f);
               }
             });
}

// The adjoint of Im2Col over the whole col matrix: image pixel += every col entry that
// reads it.
void Col2Im(const float* col, int64_t channels, const Window& w, float* img) {
  const int64_t plane = w.img_d * w.img_h * w.img_w, cols = w.rows() * w.col_w;
  ForEachTap(w, channels, 0,
             [&](int64_t c, int64_t tap, RowWalk walk, int64_t off_w, int64_t lo, int64_t hi) {
               float* yc = img + c * plane;
               const float* row = col + tap * cols;
               for (int64_t rr = 0; rr < w.rows(); ++rr, row += w.col_w, walk.Next()) {
                 const int64_t ir = walk.ImageRow();
                 if (ir < 0) continue;
                 float* yr = yc + ir * w.img_w;
                 for (int64_t s = lo; s < hi; ++s) yr[s * w.sw + off_w] += row[s];
               }
             });
}

// y[m][p] for one image: filled with the bias (or zeros) so the GEMM accumulates onto it.
void FillBias(const float* bias, int64_t m, int64_t plane, float* y) {
  for (int64_t i = 0; i < m; ++i) {
    std::fill(y + i * plane, y + (i + 1) * plane, bias != nullptr ? bias[i] : 0.0f);
  }
}

// Channels of work a parallel chunk should hold at least, for `per_channel` floats each:
// about 16K floats, so a chunk outweighs the cost of handing it to another thread.
int64_t MinChannels(int64_t per_channel) {
  return std::max<int64_t>(1, (int64_t{16} << 10) / std::max<int64_t>(1, per_channel));
}

template <typename Op>
void MapInPlace(float* y, int64_t n, Op op) {
  for (int64_t i = 0; i < n; ++i) y[i] = op(y[i]);
}

// y = act(y) over `len` floats, one switch per call so each loop is a plain vectorizable
// map of one functor.
void Activate(const ConvEpilogue& e, float* y, int64_t len) {
  switch (e.kind) {
    case ConvActivation::kNone:
      return;
    case ConvActivation::kRelu:
      return MapInPlace(y, len, ReluOp());
    case ConvActivation::kClip:
      return MapInPlace(y, len, ClipOp{e.lo, e.hi});
    case ConvActivation::kHardSwish:
    case ConvActivation::kSigmoid:
    case ConvActivation::kSilu:
      LateActivationInPlace(e.kind, y, len);
      return;
  }
}

// The activation over a band of output: for each of `channels` planes of `plane` floats
// at y, the `len` floats from `offset`. On the calling thread: the band is hot in cache
// and costs less than waking another thread (a sync point that a loaded machine makes
// expensive).
void ActivateBand(const ConvEpilogue& e, float* y, int64_t channels, int64_t plane, int64_t offset,
                  int64_t len) {
  if (e.kind == ConvActivation::kNone) return;
  for (int64_t ch = 0; ch < channels; ++ch) Activate(e, y + ch * plane + offset, len);
}

// The bias and the activation PackedGemm's micro-kernel applies to each tile before
// storing it: Relu and Clip (HardSwish and Sigmoid are LateActivateBlock's).
PackedRowOutput InKernelOutput(const ConvEpilogue& e, const float* bias) {
  PackedRowOutput out;
  out.bias = bias;
  if (PackedRowOutput::FusesActivation(e.kind)) out.act = e;
  return out;
}

// y[r][c0, c1) = act(y) for rows [r0, r1), rows ldc apart, when the micro-kernel could
// not apply it (InKernelOutput): PackedGemm's epilogue, on a block it has just finished.
void LateActivateBlock(const ConvEpilogue& e, float* y, int64_t ldc, int64_t r0, int64_t r1,
                       int64_t c0, int64_t c1) {
  if (PackedRowOutput::FusesActivation(e.kind)) return;
  for (int64_t r = r0; r < r1; ++r) Activate(e, y + r * ldc + c0, c1 - c0);
}

// The packed W of this call, or null when there is none or it is not this conv's
// (one group, W as an M x K A side).
const PackedMatrix* PackedConvWeight(const KernelContext& ctx, int64_t groups, int64_t m,
                                     int64_t k) {
  const PackedMatrix* w = ctx.packed_weight;
  if (w == nullptr || groups != 1 || w->side() != PackedMatrix::Side::kA || w->rows() != m ||
      w->cols() != k) {
    return nullptr;
  }
  return w;
}

absl::Status CheckBlasDims(absl::string_view op, int64_t m, int64_t n, int64_t k) {
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX) {
    return absl::UnimplementedError(
        absl::StrFormat("%s: GEMM dimensions %dx%dx%d exceed the BLAS int range", op, m, n, k));
  }
  return absl::OkStatus();
}

absl::StatusOr<float*> Scratch(absl::string_view op, const KernelContext& ctx, int64_t floats) {
  if (ctx.scratch == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(op, ": the kernel context has no scratch allocator"));
  }
  NDS_ASSIGN_OR_RETURN(void* p, ctx.scratch->Allocate(floats * sizeof(float)));
  return static_cast<float*>(p);
}

// A batch's images in one GEMM per `nb` of them, for a conv (one group) whose output
// plane is much smaller than K (resnet's deeper layers: P = 196, 49; K = 2304, 4608). Per
// image, OpenBLAS would repack all of W for a product only P columns wide, and W is the
// larger operand there (resnet18 at batch 8: 75 MB of packing for its last layer alone);
// side by side, nb images' col matrices make one product nb * P wide that packs W once.
// The price is one copy of the output, from the GEMM's [M x nb * P] layout to NCHW,
// with the activation applied on the way; with P well under K that copy is the smaller
// cost (resnet18 b8, 1 thread: W packing 10% -> 3.7% of the profile, copies +1.4%).
absl::Status FoldedConv(const KernelContext& ctx, const ConvGeometry& g, const Window& w, int64_t n,
                        int64_t c, int64_t m, const float* x, const float* wt, const float* bias,
                        const ConvEpilogue& act, int64_t nb, float* y) {
  const int64_t p = g.out_plane(), k_plane = g.k_plane(), k = c * k_plane;
  NDS_RETURN_IF_ERROR(CheckBlasDims("Conv", m, nb * p, k));
  NDS_ASSIGN_OR_RETURN(float* col, Scratch("Conv", ctx, k * nb * p));
  NDS_ASSIGN_OR_RETURN(float* prod, Scratch("Conv", ctx, m * nb * p));
  const PackedMatrix* packed = PackedConvWeight(ctx, 1, m, k);
  float* packed_scratch = nullptr;
  if (packed != nullptr) {
    NDS_ASSIGN_OR_RETURN(packed_scratch,
                         Scratch("Conv", ctx, PackedGemmScratchFloats(*packed, m, nb * p, k)));
  }
  for (int64_t i0 = 0; i0 < n; i0 += nb) {
    const int64_t imgs = std::min(nb, n - i0), ld = imgs * p;
    // (image, channel) pairs; image j's columns start at j * p in every row of col.
    ParallelFor(imgs * c, MinChannels(k_plane * p), [&](int64_t b, int64_t e) {
      for (int64_t pair = b; pair < e; ++pair) {
        const int64_t j = pair / c, ci = pair % c;
        Im2Col(x + ((i0 + j) * c + ci) * g.in_plane(), 1, w, 0, w.rows(), ld,
               col + ci * k_plane * ld + j * p);
      }
    });
    for (int64_t mi = 0; mi < m; ++mi) {
      std::fill(prod + mi * ld, prod + (mi + 1) * ld, bias != nullptr ? bias[mi] : 0.0f);
    }
    if (packed != nullptr) {
      PackedGemm(*packed, MatrixRef{col, ld, false}, m, ld, k, prod, ld, /*accumulate=*/true,
                 packed_scratch, [](int64_t, int64_t, int64_t, int64_t) {});
    } else {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m),
                  static_cast<int>(ld), static_cast<int>(k), 1.0f, wt, static_cast<int>(k), col,
                  static_cast<int>(ld), 1.0f, prod, static_cast<int>(ld));
    }
    for (int64_t j = 0; j < imgs; ++j) {
      float* yi = y + (i0 + j) * m * p;
      for (int64_t mi = 0; mi < m; ++mi) {
        std::memcpy(yi + mi * p, prod + mi * ld + j * p, p * sizeof(float));
      }
      ActivateBand(act, yi, m, p, 0, p);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Conv(const KernelContext& ctx, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const ConvAttrs& a = std::get<ConvAttrs>(attrs);
  const ShapeSpan xs = in[0].shape, ws = in[1].shape;
  NDS_ASSIGN_OR_RETURN(const ConvGeometry g,
                       MakeConvGeometry("Conv", a, xs.subspan(2), ws.subspan(2), false));
  const Window w = ConvWindow(g);
  const int64_t n = xs[0], c = xs[1], m = ws[0], groups = a.group;
  const int64_t cg = c / groups, mg = m / groups;
  const int64_t k = cg * g.k_plane(), p = g.out_plane();
  const float* x = in[0].as<const float>();
  const float* wt = in[1].as<const float>();
  const float* bias = in.size() > 2 ? in[2].as<const float>() : nullptr;
  float* y = out[0].as<float>();
  if (out[0].numel() == 0) return absl::OkStatus();
  const ConvEpilogue& act = a.activation;
  // A 3-D depthwise conv takes the generic path below, one group at a time.
  if (cg == 1 && groups > 1 && g.IsPlanar()) {
    return DepthwiseConv(ctx, g, n, c, mg, x, wt, bias, act, y);
  }
  NDS_RETURN_IF_ERROR(CheckBlasDims("Conv", mg, p, k));
  const bool pointwise = g.IsPointwise();
  // A 1x1 conv of a 1x1 plane (the squeeze-and-excitation convs of mobilenet_v3 and
  // efficientnet) is a matrix-vector product per image, and the images are the rows of
  // one product with W^T: the packed GEMM's 16-column tiles would be 15/16 padding.
  if (pointwise && p == 1 && groups == 1 && k > 0) {
    NDS_RETURN_IF_ERROR(CheckBlasDims("Conv", n, m, k));
    for (int64_t i = 0; i < n; ++i) FillBias(bias, m, 1, y + i * m);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n), static_cast<int>(m),
                static_cast<int>(k), 1.0f, x, static_cast<int>(k), wt, static_cast<int>(k), 1.0f, y,
                static_cast<int>(m));
    for (int64_t i = 0; i < n; ++i) ActivateBand(act, y + i * m, m, 1, 0, 1);
    return absl::OkStatus();
  }
  // W packed at load and a kernel wider than 1x1 (or strided or padded): the direct conv,
  // which reads the image in place and needs neither im2col nor the fold below.
  if (const PackedMatrix* packed = k > 0 ? PackedConvWeight(ctx, groups, m, k) : nullptr;
      packed != nullptr && DirectConvSuits(g, c)) {
    if (const PackedMatrix* u = packed->winograd();
        u != nullptr && WinogradConvSuits(g, *u, n, c, m)) {
      NDS_ASSIGN_OR_RETURN(float* scratch,
                           Scratch("Conv", ctx, WinogradConvScratchFloats(g, n, c, m)));
      WinogradConv(g, *u, n, c, m, x, bias, act, scratch, y);
      return absl::OkStatus();
    }
    NDS_ASSIGN_OR_RETURN(float* scratch, Scratch("Conv", ctx, DirectConvScratchFloats(g, n, c, m)));
    DirectConv(g, *packed, n, c, m, x, bias, act, scratch, y);
    return absl::OkStatus();
  }
  // Folded only where W's repacking clearly outweighs the output's copy (P at most
  // K / 2: resnet18's last two stages; its second stage, P = 784 and K = 1152, measured
  // no better folded).
  if (groups == 1 && n > 1 && !pointwise && 2 * p <= k && k * p * 4 <= kFoldedColBytes / 2) {
    const int64_t nb = std::min(n, kFoldedColBytes / (k * p * 4));
    return FoldedConv(ctx, g, w, n, c, m, x, wt, bias, act, nb, y);
  }
  // The col matrix is built a band of output rows at a time, so a large image's im2col
  // (resnet's first conv: 7.4 MB at batch 1) never sits in the request's scope whole.
  const int64_t band_rows =
      std::clamp<int64_t>(kIm2ColBandBytes / std::max<int64_t>(1, k * w.col_w * 4), 1, w.rows());
  float* col = nullptr;
  if (!pointwise && k > 0) {
    NDS_ASSIGN_OR_RETURN(col, Scratch("Conv", ctx, k * band_rows * w.col_w));
  }
  const PackedMatrix* packed = k > 0 ? PackedConvWeight(ctx, groups, m, k) : nullptr;
  float* packed_scratch = nullptr;
  if (packed != nullptr) {
    const int64_t max_cols = pointwise ? p : band_rows * w.col_w;
    NDS_ASSIGN_OR_RETURN(packed_scratch,
                         Scratch("Conv", ctx, PackedGemmScratchFloats(*packed, m, max_cols, k)));
  }
  const int64_t k_plane = g.k_plane();
  for (int64_t i = 0; i < n; ++i) {
    float* yi = y + i * m * p;
    if (k == 0) {  // no input channels: the bias alone
      FillBias(bias, m, p, yi);
      ActivateBand(act, yi, m, p, 0, p);
      continue;
    }
    for (int64_t gi = 0; gi < groups; ++gi) {
      const float* xg = x + (i * c + gi * cg) * g.in_plane();
      const float* wg = wt + gi * mg * k;
      const float* bg = bias != nullptr ? bias + gi * mg : nullptr;
      float* yg = yi + gi * mg * p;
      if (pointwise && packed != nullptr) {
        PackedGemm(*packed, MatrixRef{xg, p, false}, mg, p, k, yg, p, /*accumulate=*/false,
                   packed_scratch, InKernelOutput(act, bg),
                   [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
                     LateActivateBlock(act, yg, p, r0, r1, c0, c1);
                   });
        continue;
      }
      if (pointwise) {
        FillBias(bg, mg, p, yg);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(mg),
                    static_cast<int>(p), static_cast<int>(k), 1.0f, wg, static_cast<int>(k), xg,
                    static_cast<int>(p), 1.0f, yg, static_cast<int>(p));
        ActivateBand(act, yg, mg, p, 0, p);
        continue;
      }
      for (int64_t r0 = 0; r0 < w.rows(); r0 += band_rows) {
        const int64_t r1 = std::min(w.rows(), r0 + band_rows);
        const int64_t cols = (r1 - r0) * w.col_w;
        ParallelFor(cg, MinChannels(k_plane * cols), [&](int64_t c0, int64_t c1) {
          Im2Col(xg + c0 * g.in_plane(), c1 - c0, w, r0, r1, cols, col + c0 * k_plane * cols);
          if (packed != nullptr) return;  // its epilogue adds the bias
          // The bias under this band, split the same way over the output channels.
          const int64_t m0 = c0 * mg / cg, m1 = c1 * mg / cg;
          for (int64_t mi = m0; mi < m1; ++mi) {
            float* yb = yg + mi * p + r0 * w.col_w;
            std::fill(yb, yb + cols, bg != nullptr ? bg[mi] : 0.0f);
          }
        });
        float* yb = yg + r0 * w.col_w;
        if (packed != nullptr) {
          PackedGemm(*packed, MatrixRef{col, cols, false}, mg, cols, k, yb, p,
                     /*accumulate=*/false, packed_scratch, InKernelOutput(act, bg),
                     [&](int64_t q0, int64_t q1, int64_t c0, int64_t c1) {
                       LateActivateBlock(act, yb, p, q0, q1, c0, c1);
                     });
          continue;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(mg),
                    static_cast<int>(cols), static_cast<int>(k), 1.0f, wg, static_cast<int>(k), col,
                    static_cast<int>(cols), 1.0f, yb, static_cast<int>(p));
        ActivateBand(act, yg, mg, p, r0 * w.col_w, cols);
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ConvTranspose(const KernelContext& ctx, absl::Span<const TensorView> in,
                           absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const ConvAttrs& a = std::get<ConvAttrs>(attrs);
  const ShapeSpan xs = in[0].shape, ws = in[1].shape;
  NDS_ASSIGN_OR_RETURN(const ConvGeometry g,
                       MakeConvGeometry("ConvTranspose", a, xs.subspan(2), ws.subspan(2), true));
  const Window w = TransposeWindow(g);
  const int64_t n = xs[0], c = xs[1], groups = a.group;
  const int64_t cg = c / groups, mg = ws[1], m = mg * groups;
  const int64_t k = mg * g.k_plane(), p = g.in_plane();  // col is [k x p] per group
  const float* x = in[0].as<const float>();
  const float* wt = in[1].as<const float>();
  const float* bias = in.size() > 2 ? in[2].as<const float>() : nullptr;
  float* y = out[0].as<float>();
  if (out[0].numel() == 0) return absl::OkStatus();
  NDS_RETURN_IF_ERROR(CheckBlasDims("ConvTranspose", k, p, cg));
  float* col = nullptr;
  if (k * p > 0) {
    NDS_ASSIGN_OR_RETURN(col, Scratch("ConvTranspose", ctx, k * p));
  }
  for (int64_t i = 0; i < n; ++i) {
    float* yi = y + i * m * g.out_plane();
    FillBias(bias, m, g.out_plane(), yi);
    if (cg == 0 || p == 0) continue;
    for (int64_t gi = 0; gi < groups; ++gi) {
      const float* xg = x + (i * c + gi * cg) * p;
      // W_g is [cg x k] row-major; col = W_g^T [k x cg] * x_g [cg x p].
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(k), static_cast<int>(p),
                  static_cast<int>(cg), 1.0f, wt + gi * cg * k, static_cast<int>(k), xg,
                  static_cast<int>(p), 0.0f, col, static_cast<int>(p));
      Col2Im(col, mg, w, yi + gi * mg * g.out_plane());
    }
  }
  return absl::OkStatus();
}

}  // namespace ndserve::kernels::cpu
