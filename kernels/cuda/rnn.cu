// Per-step gate math of LSTM, GRU and RNN: one thread per (batch entry, hidden unit),
// grid-stride. Mirrors kernels/cpu/rnn.cc line for line so both devices agree.
#include <cmath>

#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/rnn_launchers.h"

namespace ndserve::kernels::gpu {
namespace {

__device__ __forceinline__ float SigmoidF(float x) { return 1.0f / (1.0f + expf(-x)); }

__device__ __forceinline__ float ClipF(float x, float clip) {
  return clip > 0.0f ? fminf(fmaxf(x, -clip), clip) : x;
}

// The entry's length and this step's time; false when the entry has finished.
__device__ __forceinline__ bool StepTime(const RnnStepArgs& a, int64_t b, int64_t* t) {
  int64_t len = a.seq;
  if (a.lens != nullptr) {
    len = a.lens[b];
    len = len < 0 ? 0 : (len > a.seq ? a.seq : len);
  }
  if (a.step >= len) return false;
  *t = a.reverse ? len - 1 - a.step : a.step;
  return true;
}

__global__ void AddBiasKernel(float* x, int64_t ld, const float* bias, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const int64_t row = i / cols, j = i - row * cols;
    x[row * ld + j] += bias[j];
  }
}

__global__ void GruResetKernel(RnnStepArgs a) {
  const int64_t H = a.hidden, gh = 3 * H, n = a.batch * H;
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const int64_t b = i / H, j = i - b * H;
    int64_t t;
    if (!StepTime(a, b, &t)) {
      a.rh[i] = 0.0f;
      continue;
    }
    const int64_t row = a.batch_major ? b * a.seq + t : t * a.batch + b;
    const float* xw = a.xw + row * gh;
    float* g = a.gates + b * gh;
    g[j] = SigmoidF(ClipF(xw[j] + g[j], a.clip));
    a.rh[i] = SigmoidF(ClipF(xw[H + j] + g[H + j], a.clip)) * a.h[i];
  }
}

__global__ void StepKernel(RnnStepArgs a) {
  const int64_t H = a.hidden, n = a.batch * H;
  const int64_t gh = (a.cell == RnnCellCode::kLstm ? 4 : a.cell == RnnCellCode::kGru ? 3 : 1) * H;
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const int64_t b = i / H, j = i - b * H;
    int64_t t;
    if (!StepTime(a, b, &t)) continue;
    const int64_t row = a.batch_major ? b * a.seq + t : t * a.batch + b;
    const float* xw = a.xw + row * gh;
    const float* g = a.gates + b * gh;
    float h;
    if (a.cell == RnnCellCode::kLstm) {
      const float c_prev = a.c[i];
      float pi = xw[j] + g[j], po = xw[H + j] + g[H + j];
      float pf = xw[2 * H + j] + g[2 * H + j];
      const float pc = xw[3 * H + j] + g[3 * H + j];
      if (a.peep != nullptr) {
        pi += a.peep[j] * c_prev;
        pf += a.peep[2 * H + j] * c_prev;
      }
      const float cell = SigmoidF(ClipF(pf, a.clip)) * c_prev +
                         SigmoidF(ClipF(pi, a.clip)) * tanhf(ClipF(pc, a.clip));
      if (a.peep != nullptr) po += a.peep[H + j] * cell;
      a.c[i] = cell;
      h = SigmoidF(ClipF(po, a.clip)) * tanhf(cell);
    } else if (a.cell == RnnCellCode::kGru) {
      float z, cand;
      if (a.linear_before_reset) {
        z = SigmoidF(ClipF(xw[j] + g[j], a.clip));
        const float rg = SigmoidF(ClipF(xw[H + j] + g[H + j], a.clip));
        const float hr = g[2 * H + j] + (a.rbh != nullptr ? a.rbh[j] : 0.0f);
        cand = tanhf(ClipF(xw[2 * H + j] + rg * hr, a.clip));
      } else {
        z = g[j];
        cand = tanhf(ClipF(xw[2 * H + j] + g[2 * H + j], a.clip));
      }
      h = (1.0f - z) * cand + z * a.h[i];
    } else {
      h = tanhf(ClipF(xw[j] + g[j], a.clip));
    }
    a.h[i] = h;
    const int64_t y =
        a.batch_major ? (b * a.seq + t) * a.dirs + a.dir : (t * a.dirs + a.dir) * a.batch + b;
    a.y[y * H + j] = h;
  }
}

}  // namespace

cudaError_t LaunchRnnAddBias(float* x, int64_t ld, const float* bias, int64_t rows, int64_t cols,
                             cudaStream_t stream) {
  if (rows * cols == 0) return cudaSuccess;
  AddBiasKernel<<<GridFor(rows * cols), kBlock, 0, stream>>>(x, ld, bias, rows, cols);
  return cudaGetLastError();
}

cudaError_t LaunchGruResetStep(const RnnStepArgs& args, cudaStream_t stream) {
  if (args.batch * args.hidden == 0) return cudaSuccess;
  GruResetKernel<<<GridFor(args.batch * args.hidden), kBlock, 0, stream>>>(args);
  return cudaGetLastError();
}

cudaError_t LaunchRnnStep(const RnnStepArgs& args, cudaStream_t stream) {
  if (args.batch * args.hidden == 0) return cudaSuccess;
  StepKernel<<<GridFor(args.batch * args.hidden), kBlock, 0, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace ndserve::kernels::gpu
