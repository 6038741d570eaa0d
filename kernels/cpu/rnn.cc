// LSTM, GRU and RNN on the CPU. Per direction, the input projections of every time step
// are one cblas_sgemm (X [seq*batch, input] times W^T); the recurrence then runs step by
// step: one sgemm of the hidden state with R^T for the whole batch, and the gate math
// per batch entry. Working space (projections, gates, state) comes from ctx.scratch.
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/rnn_plan.h"

namespace ndserve::kernels::cpu {
namespace {

inline float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

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
};

absl::StatusOr<Work> TakeWork(absl::string_view op, const KernelContext& ctx, const RnnPlan& p) {
  const int64_t gh = p.gates * p.hidden;
  const int64_t sizes[] = {p.seq * p.batch * gh, p.batch * gh,       p.batch * p.hidden,
                           p.batch * p.hidden,   p.batch * p.hidden, gh};
  int64_t total = 0;
  for (int64_t s : sizes) total += (s + 63) / 64 * 64;  // keep each block 256-byte aligned
  if (ctx.scratch == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(op, ": the kernel context has no scratch"));
  }
  NDS_ASSIGN_OR_RETURN(void* block, ctx.scratch->Allocate(total * sizeof(float)));
  float* next = static_cast<float*>(block);
  float* parts[6];
  for (int i = 0; i < 6; ++i) {
    parts[i] = next;
    next += (sizes[i] + 63) / 64 * 64;
  }
  return Work{parts[0], parts[1], parts[2], parts[3], parts[4], parts[5]};
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
  LoadState(p, dir, p.initial_h, work.h);
  if (p.cell == RnnCell::kLstm) LoadState(p, dir, p.initial_c, work.c);
  const float* peep = p.p == nullptr ? nullptr : p.p + dir * 3 * H;
  const float* rbh = lbr && rb != nullptr ? rb + 2 * H : nullptr;
  const float clip = p.clip;
  const bool reverse = p.Reverse(dir);

  for (int64_t s = 0; s < p.seq; ++s) {
    // The recurrent product; GRU without linear_before_reset needs r first for its h gate.
    GemmNT(p.batch, gru && !lbr ? 2 * H : gh, H, work.h, H, r, H, work.gates, gh);
    if (gru && !lbr) {
      for (int64_t b = 0; b < p.batch; ++b) {
        const int64_t len = p.lens == nullptr ? p.seq : p.lens[b];
        float* rh = work.rh + b * H;
        if (s >= len) {
          std::fill(rh, rh + H, 0.0f);
          continue;
        }
        const int64_t t = reverse ? len - 1 - s : s;
        const float* xw = work.xw + p.XRow(t, b) * gh;
        float* g = work.gates + b * gh;
        const float* h = work.h + b * H;
        for (int64_t j = 0; j < H; ++j) {
          g[j] = Sigmoid(Clip(xw[j] + g[j], clip));  // z, kept for the update below
          rh[j] = Sigmoid(Clip(xw[H + j] + g[H + j], clip)) * h[j];
        }
      }
      GemmNT(p.batch, H, H, work.rh, H, r + 2 * H * H, H, work.gates + 2 * H, gh);
    }
    for (int64_t b = 0; b < p.batch; ++b) {
      const int64_t len = p.lens == nullptr ? p.seq : p.lens[b];
      if (s >= len) continue;  // the state keeps this entry's last valid step
      const int64_t t = reverse ? len - 1 - s : s;
      const float* xw = work.xw + p.XRow(t, b) * gh;
      const float* g = work.gates + b * gh;
      float* h = work.h + b * H;
      switch (p.cell) {
        case RnnCell::kLstm: {  // gate order i, o, f, c; peepholes i, o, f
          float* c = work.c + b * H;
          for (int64_t j = 0; j < H; ++j) {
            float pi = xw[j] + g[j], po = xw[H + j] + g[H + j];
            float pf = xw[2 * H + j] + g[2 * H + j];
            const float pc = xw[3 * H + j] + g[3 * H + j];
            if (peep != nullptr) {
              pi += peep[j] * c[j];
              pf += peep[2 * H + j] * c[j];
            }
            const float i_gate = Sigmoid(Clip(pi, clip));
            const float f_gate = Sigmoid(Clip(pf, clip));
            const float cell = f_gate * c[j] + i_gate * std::tanh(Clip(pc, clip));
            if (peep != nullptr) po += peep[H + j] * cell;
            c[j] = cell;
            h[j] = Sigmoid(Clip(po, clip)) * std::tanh(cell);
          }
          break;
        }
        case RnnCell::kGru: {  // gate order z, r, h
          for (int64_t j = 0; j < H; ++j) {
            float z, cand;
            if (lbr) {
              z = Sigmoid(Clip(xw[j] + g[j], clip));
              const float rg = Sigmoid(Clip(xw[H + j] + g[H + j], clip));
              const float hr = g[2 * H + j] + (rbh != nullptr ? rbh[j] : 0.0f);
              cand = std::tanh(Clip(xw[2 * H + j] + rg * hr, clip));
            } else {
              z = g[j];
              cand = std::tanh(Clip(xw[2 * H + j] + g[2 * H + j], clip));
            }
            h[j] = (1.0f - z) * cand + z * h[j];
          }
          break;
        }
        case RnnCell::kRnn:
          for (int64_t j = 0; j < H; ++j) h[j] = std::tanh(Clip(xw[j] + g[j], clip));
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
