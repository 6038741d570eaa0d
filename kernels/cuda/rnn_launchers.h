#ifndef NDSERVE_KERNELS_CUDA_RNN_LAUNCHERS_H_
#define NDSERVE_KERNELS_CUDA_RNN_LAUNCHERS_H_

// Raw launchers of the recurrent ops' device code (rnn.cu): plain pointers in,
// cudaError_t (the launch's cudaGetLastError) out, work queued on `stream`. The products
// with W and R are cuBLAS calls made by rnn_kernels.cc; these kernels do the per-element
// gate math of one time step. Reentrant.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ndserve::kernels::gpu {

enum class RnnCellCode : int { kLstm, kGru, kRnn };

// One time step `step` of one direction, for every (batch entry, hidden unit). Batch
// entry b runs while step < its length (lens[b], clamped to [0, seq]; seq when lens is
// null) at time t = step (forward) or length - 1 - step (reverse); finished entries keep
// their state. Pointers that the op does not have are null.
struct RnnStepArgs {
  RnnCellCode cell = RnnCellCode::kRnn;
  const float* xw = nullptr;    // [seq * batch, gates * hidden] projections plus biases
  float* gates = nullptr;       // [batch, gates * hidden] recurrent products of this step
  float* h = nullptr;           // [batch, hidden] state, updated in place
  float* c = nullptr;           // [batch, hidden] LSTM cell state
  float* rh = nullptr;          // [batch, hidden] GRU r (.) H (linear_before_reset 0)
  const float* peep = nullptr;  // [3 * hidden] LSTM peepholes i, o, f
  const float* rbh = nullptr;   // [hidden] GRU Rbh when linear_before_reset is 1
  float* y = nullptr;           // Y, written at this step's time for running entries
  const int32_t* lens = nullptr;
  int64_t seq = 0, batch = 0, hidden = 0, dirs = 1, dir = 0, step = 0;
  bool batch_major = false;
  bool reverse = false;
  bool linear_before_reset = false;
  float clip = 0.0f;
};

// x[row * ld + j] += bias[j] for j < cols.
cudaError_t LaunchRnnAddBias(float* x, int64_t ld, const float* bias, int64_t rows, int64_t cols,
                             cudaStream_t stream);
// GRU with linear_before_reset 0, before the h gate's product: gates' z part becomes
// sigmoid(z), and rh = sigmoid(r) (.) H (zero for finished entries).
cudaError_t LaunchGruResetStep(const RnnStepArgs& args, cudaStream_t stream);
// The step's remaining gate math, new state, and Y.
cudaError_t LaunchRnnStep(const RnnStepArgs& args, cudaStream_t stream);

}  // namespace ndserve::kernels::gpu

#endif  // NDSERVE_KERNELS_CUDA_RNN_LAUNCHERS_H_
