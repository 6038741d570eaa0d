// LSTM, GRU and RNN on the CPU. Per direction, the input projections of every time step
// are one cblas_sgemm (X [seq*batch, input] times W^T); the recurrence then runs step by
// step: one product of the hidden state with R^T for the whole batch (RowGemm on a copy
// of R^T made once per call at small batch, sgemm otherwise), and the gate math per batch
// entry in branch-free loops (lane_math.h) that vectorize. Working space (projections,
// gates, state, R^T) comes from ctx.scratch.
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/isa_clones.h"
#include "kernels/cpu/lane_math.h"
#include "kernels/cpu/row_gemm.h"
#include "kernels/rnn_plan.h"

namespace ndserve::kernels::cpu {
namespace {

// Clips a gate pre-activation when the op has a clip threshold.
inline float Clip(float x, float clip) {
  return clip > 0.0f ? std::min(std::max(x, -clip), clip) : x;
}

// C[m, n] (row stride ldc) = A[m, k] * B[n, k]^T (+ C when accumulate).
void GemmNT(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
            int64_t ldb, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0f, a, static_cast<int>(lda), b, static_cast<int>(ldb), 0.0f,
              c, static_cast<int>(ldc));
}

// Working space of one call, reused by every direction.
struct Work {
  float* xw;     // [seq * batch, gates * hidden]: input projections plus biases
  float* gates;  // [batch, gates * hidden]: the recurrent product of one step
  float* h;      // [batch, hidden]
  float* c;      // [batch, hidden] (LSTM)
  float* rh;     // [batch, hidden] (GRU with linear_before_reset 0: r (.) H)
  float* bias;   // [gates * hidden]
  float* rt;     // [hidden, gates * hidden]: R^T of the direction (RowGemm's B), or null
};

// RowGemm serves the per-step product at small batch (kernels/cpu/row_gemm.h).
bool UseRowGemm(const RnnPlan& p) { return p.batch <= kRowGemmMaxRows; }

absl::StatusOr<Work> TakeWork(absl::string_view op, const KernelContext& ctx, const RnnPlan& p) {
  const int64_t gh = p.gates * p.hidden;
  const int64_t sizes[] = {p.seq * p.batch * gh,
                           p.batch * gh,
                           p.batch * p.hidden,
                           p.batch * p.hidden,
                           p.batch * p.hidden,
                           gh,
                           UseRowGemm(p) ? p.hidden * gh : 0};
  int64_t total = 0;
  for (int64_t s : sizes) total += (s + 63) / 64 * 64;  // keep each block 256-byte aligned
  if (ctx.scratch == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(op, ": the kernel context has no scratch"));
  }
  NDS_ASSIGN_OR_RETURN(void* block, ctx.scratch->Allocate(total * sizeof(float)));
  float* next = static_cast<float*>(block);
  float* parts[7];
  for (int i = 0; i < 7; ++i) {
    parts[i] = next;
    next += (sizes[i] + 63) / 64 * 64;
  }
  return Work{parts[0],
              parts[1],
              parts[2],
              parts[3],
              parts[4],
              parts[5],
              UseRowGemm(p) ? parts[6] : nullptr};
}

// Writes a [batch, hidden] state to Y_h / Y_c's slice of direction `dir`.
void StoreState(const RnnPlan& p, int64_t dir, const float* state, float* out) {
  if (out == nullptr) return;
  for (int64_t b = 0; b < p.batch; ++b) {
    std::memcpy(out + p.StateOffset(dir, b), state + b * p.hidden, p.hidden * sizeof(float));
  }
}

void LoadState(const RnnPlan& p, int64_t dir, const float* initial, float* state) {
  for (int64_t b = 0; b < p.batch; ++b) {
    float* dst = state + b * p.hidden;
    if (initial == nullptr) {
      std::fill(dst, dst + p.hidden, 0.0f);
    } else {
      std::memcpy(dst, initial + p.StateOffset(dir, b), p.hidden * sizeof(float));
    }
  }
}

struct Sigmoid {
  float operator()(float x) const { return LaneSigmoid(x); }
};
struct Tanh {
  float operator()(float x) const { return LaneTanh(x); }
};

// v[j] = f(clip(v[j] + x[j])) over n (x may be null): a gate's pre-activation to its
// value. Separate branch-free loops per case, so each vectorizes.
template <typename F>
void Activate(float* v, const float* x, int64_t n, float clip, F f) {
  if (x != nullptr) {
    for (int64_t j = 0; j < n; ++j) v[j] += x[j];
  }
  if (clip > 0.0f) {
    for (int64_t j = 0; j < n; ++j) v[j] = Clip(v[j], clip);
  }
  for (int64_t j = 0; j < n; ++j) v[j] = f(v[j]);
}

// One LSTM step of one batch entry: g holds the recurrent product (gate order i, o, f,
// c), xw the input projection; peepholes (i, o, f) optional. Updates c and h.
NDS_CPU_CLONES void LstmCell(int64_t H, const float* xw, float* g, const float* peep, float clip,
                             float* c, float* h) {
  float *gi = g, *go = g + H, *gf = g + 2 * H, *gc = g + 3 * H;
  if (peep != nullptr) {
    for (int64_t j = 0; j < H; ++j) {
      gi[j] += peep[j] * c[j];
      gf[j] += peep[2 * H + j] * c[j];
    }
  }
  Activate(gi, xw, H, clip, Sigmoid());
  Activate(gf, xw + 2 * H, H, clip, Sigmoid());
  Activate(gc, xw + 3 * H, H, clip, Tanh());
  for (int64_t j = 0; j < H; ++j) c[j] = gf[j] * c[j] + gi[j] * gc[j];
  // o's peephole sees the new cell.
  if (peep != nullptr) {
    for (int64_t j = 0; j < H; ++j) go[j] += peep[H + j] * c[j];
  }
  Activate(go, xw + H, H, clip, Sigmoid());
  for (int64_t j = 0; j < H; ++j) h[j] = go[j] * LaneTanh(c[j]);
}

// y[cols, rows] = x[rows, cols]^T in 8 x 8 tiles: row by row, the writes of one source
// row land a whole row of y apart, and those strides map to a few cache sets only.
void TransposeTiled(const float* x, int64_t rows, int64_t cols, float* y) {
  constexpr int64_t kTile = 8;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    const int64_t r1 = std::min(rows, r0 + kTile);
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t c1 = std::min(cols, c0 + kTile);
      for (int64_t c = c0; c < c1; ++c) {
        for (int64_t r = r0; r < r1; ++r) y[c * rows + r] = x[r * cols + c];
      }
    }
  }
}

// out[batch, col0 : col0 + n] (row stride gates * hidden) = h [batch, hidden] times rows
// col0 .. col0 + n of R, transposed.
void StepProduct(const RnnPlan& p, const Work& work, const float* r, int64_t col0, int64_t n,
                 const float* h, float* out) {
  const int64_t H = p.hidden, gh = p.gates * H;
  if (work.rt != nullptr) {
    RowGemm(p.batch, n, H, h, H, work.rt + col0, gh, out + col0, gh);
  } else {
    GemmNT(p.batch, n, H, h, H, r + col0 * H, H, out + col0, gh);
  }
}

void RunDirection(const RnnPlan& p, int64_t dir, const Work& work) {
  const int64_t H = p.hidden, gh = p.gates * H;
  const float* w = p.w + dir * gh * p.input;
  const float* r = p.r + dir * gh * H;
  const float* wb = p.b == nullptr ? nullptr : p.b + dir * 2 * gh;
  const float* rb = wb == nullptr ? nullptr : wb + gh;
  const bool gru = p.cell == RnnCell::kGru;
  const bool lbr = gru && p.linear_before_reset;
  // Biases that add straight to a gate's pre-activation are folded into the projections.
  // GRU's Rbh with linear_before_reset sits inside r (.) (H Rh^T + Rbh), so it stays out.
  for (int64_t j = 0; j < gh; ++j) {
    float v = 0.0f;
    if (wb != nullptr) v = wb[j] + (lbr && j >= 2 * H ? 0.0f : rb[j]);
    work.bias[j] = v;
  }
  GemmNT(p.seq * p.batch, gh, p.input, p.x, p.input, w, p.input, work.xw, gh);
  for (int64_t row = 0; row < p.seq * p.batch; ++row) {
    float* xw = work.xw + row * gh;
    for (int64_t j = 0; j < gh; ++j) xw[j] += work.bias[j];
  }
  if (work.rt != nullptr) TransposeTiled(r, gh, H, work.rt);
  LoadState(p, dir, p.initial_h, work.h);
  if (p.cell == RnnCell::kLstm) LoadState(p, dir, p.initial_c, work.c);
  const float* peep = p.p == nullptr ? nullptr : p.p + dir * 3 * H;
  const float* rbh = lbr && rb != nullptr ? rb + 2 * H : nullptr;
  const float clip = p.clip;
  const bool reverse = p.Reverse(dir);

  for (int64_t s = 0; s < p.seq; ++s) {
    // The recurrent product; GRU without linear_before_reset needs r first for its h gate.
    StepProduct(p, work, r, 0, gru && !lbr ? 2 * H : gh, work.h, work.gates);
    if (gru && !lbr) {
      for (int64_t b = 0; b < p.batch; ++b) {
        const int64_t len = p.lens == nullptr ? p.seq : p.lens[b];
        float* rh = work.rh + b * H;
        if (s >= len) {
          std::fill(rh, rh + H, 0.0f);
          continue;
        }
        const int64_t t = reverse ? len - 1 - s : s;
        float* g = work.gates + b * gh;
        const float* h = work.h + b * H;
        Activate(g, work.xw + p.XRow(t, b) * gh, 2 * H, clip, Sigmoid());  // z (kept), r
        for (int64_t j = 0; j < H; ++j) rh[j] = g[H + j] * h[j];
      }
      StepProduct(p, work, r, 2 * H, H, work.rh, work.gates);
    }
    for (int64_t b = 0; b < p.batch; ++b) {
      const int64_t len = p.lens == nullptr ? p.seq : p.lens[b];
      if (s >= len) continue;  // the state keeps this entry's last valid step
      const int64_t t = reverse ? len - 1 - s : s;
      const float* xw = work.xw + p.XRow(t, b) * gh;
      float* g = work.gates + b * gh;
      float* h = work.h + b * H;
      switch (p.cell) {
        case RnnCell::kLstm:
          LstmCell(H, xw, g, peep, clip, work.c + b * H, h);
          break;
        case RnnCell::kGru:
          if (lbr) {
            Activate(g, xw, 2 * H, clip, Sigmoid());  // z, r
            float* hg = g + 2 * H;                    // r (.) (H Rh^T + Rbh) + Xw_h
            if (rbh != nullptr) {
              for (int64_t j = 0; j < H; ++j) hg[j] += rbh[j];
            }
            for (int64_t j = 0; j < H; ++j) hg[j] = xw[2 * H + j] + g[H + j] * hg[j];
            Activate(hg, nullptr, H, clip, Tanh());
          } else {
            Activate(g + 2 * H, xw + 2 * H, H, clip, Tanh());
          }
          for (int64_t j = 0; j < H; ++j) h[j] = (1.0f - g[j]) * g[2 * H + j] + g[j] * h[j];
          break;
        case RnnCell::kRnn:
          Activate(g, xw, H, clip, Tanh());
          std::memcpy(h, g, H * sizeof(float));
          break;
      }
      std::memcpy(p.y + p.YOffset(t, dir, b), h, H * sizeof(float));
    }
  }
  StoreState(p, dir, work.h, p.y_h);
  if (p.cell == RnnCell::kLstm) StoreState(p, dir, work.c, p.y_c);
}

absl::Status RunRecurrent(absl::string_view op, RnnCell cell, const KernelContext& ctx,
                          absl::Span<const TensorView> in, absl::Span<const TensorView> out,
                          const OpAttrs& attrs) {
  const RnnPlan p = MakeRnnPlan(cell, std::get<RecurrentAttrs>(attrs), in, out);
  const int64_t gh = p.gates * p.hidden;
  if (p.seq * p.batch > INT_MAX || gh > INT_MAX || p.input > INT_MAX) {
    return absl::UnimplementedError(absl::StrFormat(
        "%s: sizes seq*batch %d, gates*hidden %d, input %d exceed the BLAS int range", op,
        p.seq * p.batch, gh, p.input));
  }
  if (p.lens != nullptr) {
    for (int64_t b = 0; b < p.batch; ++b) {
      if (p.lens[b] < 0 || p.lens[b] > p.seq) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: sequence_lens[%d] is %d, outside [0, %d]", op, b, p.lens[b], p.seq));
      }
    }
    // Steps past an entry's length stay zero in Y.
    std::fill(p.y, p.y + out[0].numel(), 0.0f);
  }
  if (p.batch == 0) return absl::OkStatus();
  NDS_ASSIGN_OR_RETURN(const Work work, TakeWork(op, ctx, p));
  for (int64_t dir = 0; dir < p.dirs; ++dir) RunDirection(p, dir, work);
  return absl::OkStatus();
}

}  // namespace

absl::Status LSTM(const KernelContext& ctx, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return RunRecurrent("LSTM", RnnCell::kLstm, ctx, in, out, attrs);
}

absl::Status GRU(const KernelContext& ctx, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return RunRecurrent("GRU", RnnCell::kGru, ctx, in, out, attrs);
}

absl::Status RNN(const KernelContext& ctx, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return RunRecurrent("RNN", RnnCell::kRnn, ctx, in, out, attrs);
}

}  // namespace ndserve::kernels::cpu
