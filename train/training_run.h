#ifndef NDSERVE_TRAIN_TRAINING_RUN_H_
#define NDSERVE_TRAIN_TRAINING_RUN_H_

// One training session's model, loss and optimizer (docs/design.md §10.1): what the
// Trainer service's StartSession builds and its Train stream steps. The graph is read
// again from the served version's file (unfused, with its initializer bytes, which the
// served Model freed after upload); the trainable initializers become parameter copies in
// the session's trainer scope, so serving keeps using the version's own arrays until a
// Commit publishes the trained values as a new version.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "engine/batch_iterator.h"
#include "engine/graph.h"
#include "engine/host_tensor.h"
#include "engine/training_scopes.h"
#include "kernels/gpu_resources.h"
#include "kernels/kernel_context.h"
#include "train/carried_state.h"
#include "train/optimizer.h"
#include "train/recorded_graph.h"

namespace ndserve::train {

enum class LossKind { kCrossEntropy, kBceWithLogits, kMse };
enum class OptimizerKind { kSgd, kMomentum, kAdam };

// "cross_entropy", "bce_with_logits", "mse" / "sgd", "momentum", "adam":
// INVALID_ARGUMENT naming the unknown spelling.
absl::StatusOr<LossKind> ParseLossKind(absl::string_view name);
absl::StatusOr<OptimizerKind> ParseOptimizerKind(absl::string_view name);

struct TrainingRunOptions {
  // Initializer names; empty: every FP32 initializer.
  std::vector<std::string> trainable;
  LossKind loss = LossKind::kCrossEntropy;
  // The graph value the loss reads (e.g. the logits before a final Softmax or
  // Sigmoid); empty: the graph's first output.
  std::string target_output;
  OptimizerKind optimizer = OptimizerKind::kSgd;
  float lr = 0.01f;
  float momentum = 0.9f;  // kMomentum only
  // 0: no recurrent state is carried. Above 0: the graph's one LSTM carries its state
  // from step to step (its initial_h/initial_c are model inputs the run feeds, its
  // Y_h/Y_c outputs what it keeps), with the history cut after every step, and a batch
  // is that many time steps (docs/design.md §10.1).
  int truncated_bptt_steps = 0;
};

struct StepResult {
  std::int64_t step = 0;  // 1 for the session's first step
  float loss = 0.0f;
  // L2 norm over every parameter's gradient, before the update.
  float grad_norm = 0.0f;
  // What the step's batch scope held at its end: every array of the step lives until
  // the scope closes, so this is the step's peak.
  std::uint64_t batch_peak_bytes = 0;
  // Uploaded batches the session's batch iterator held during the step (the step's
  // own and the one read ahead: never above 2); 0 for a step on host tensors.
  int batches_held = 0;
  // The step's own time on a stream (TrainingRuns::Stream), from having its batch to
  // its result: a wait for a client's batch is not in it.
  absl::Duration duration;
};

// Ownership: owns the graph read from the file and the recorded graph and optimizer;
// their arrays are held by `scope` (shared), so closing the scope (Abort, expiry) frees
// them and a later Step fails with FAILED_PRECONDITION. Not thread-safe: the session's
// one Train stream steps it (the scope refuses a second concurrent step anyway).
class TrainingRun {
 public:
  // INVALID_ARGUMENT for bad options (naming them) or an unknown target output or
  // trainable name; UNIMPLEMENTED for an op without a backward; the reader's errors for
  // `model_path`. A trainer scope on a CUDA device gets the run its own stream and cuBLAS
  // handle (FAILED_PRECONDITION when the device is absent).
  static absl::StatusOr<std::unique_ptr<TrainingRun>> Create(
      const std::string& model_path, std::shared_ptr<engine::TrainerScope> scope,
      TrainingRunOptions options);

  // One step on one batch: opens the batch scope, uploads `inputs` (one per graph input,
  // by name) and `labels` into it, runs forward to the target, the loss, backward, the
  // optimizer and ClearGrad, and closes the scope. INVALID_ARGUMENT naming a missing,
  // unknown or mis-shaped tensor, or an id or label out of range (the parameters are
  // then left as they were); the scope's FAILED_PRECONDITION once the session is closed.
  // On a GPU the step queues everything on the run's stream and synchronizes twice:
  // after backward, to check the device's error flag and read the loss and gradient
  // norm before anything is updated, and before its batch scope frees the arrays.
  absl::StatusOr<StepResult> Step(absl::Span<const engine::HostTensor> inputs,
                                  const engine::HostTensor& labels);

  // One step on a batch a BatchIterator uploaded under this run's trainer scope: its
  // arrays are the inputs by name and, last, the labels. Validates like the host form;
  // the batch stays the iterator's (freed when it moves on).
  absl::StatusOr<StepResult> Step(const engine::DeviceBatch& batch);

  // The current values of the trained parameters, by initializer name (what a Commit
  // publishes).
  absl::StatusOr<std::vector<engine::HostTensor>> Parameters() const;

  std::int64_t steps() const { return steps_; }
  const TrainingRunOptions& options() const { return options_; }

 private:
  TrainingRun(std::unique_ptr<engine::Graph> graph, std::shared_ptr<engine::TrainerScope> scope,
              TrainingRunOptions options)
      : graph_(std::move(graph)), scope_(std::move(scope)), options_(std::move(options)) {}

  // A device-side tensor of a step: uploaded into the step's scope or by an iterator.
  struct Named {
    absl::string_view name;
    NDArray array;
  };
  // Opens the step's scope, runs `fill` to get the step's inputs and labels and then
  // the step; a refused step leaves the gradients clean.
  template <typename Fill>
  absl::StatusOr<StepResult> StepWith(Fill fill);
  absl::StatusOr<StepResult> RunStep(NDManager& batch, absl::Span<const Named> inputs,
                                     const Named& labels);

  // The kernel context the step's ops run on (train/compute.h): the CPU's, or on a GPU
  // the run's own GpuResources' (its stream, cuBLAS handle and error flag, with a
  // cuBLAS workspace from the trainer scope).
  absl::Status SetUpDevice();
  // Waits for the step's queued work (a no-op on the CPU).
  absl::Status Synchronize();
  // INVALID_ARGUMENT when a queued kernel met an id or label out of range; only after
  // Synchronize.
  absl::Status CheckDeviceErrors();

  std::unique_ptr<engine::Graph> graph_;  // RecordedGraph points into it
  std::shared_ptr<engine::TrainerScope> scope_;
  std::unique_ptr<kernels::GpuResources> gpu_;
  kernels::KernelContext context_ = kernels::KernelContext::Cpu();
  TrainingRunOptions options_;
  std::unique_ptr<RecordedGraph> recorded_;
  std::unique_ptr<Optimizer> optimizer_;
  std::int64_t steps_ = 0;

  // Truncated BPTT (truncated_bptt_steps > 0): the LSTM's state between steps, the
  // graph inputs it feeds (initial_h, initial_c), the values it takes after each step
  // (Y_h, Y_c) and the graph input that is the LSTM's X, if X is one (-1 otherwise).
  absl::Status SetUpCarriedState();
  std::optional<CarriedState> carried_;
  int carried_inputs_[2] = {-1, -1};
  std::string carried_outputs_[2];
  int sequence_input_ = -1;
};

}  // namespace ndserve::train

#endif  // NDSERVE_TRAIN_TRAINING_RUN_H_
