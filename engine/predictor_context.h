#ifndef NDSERVE_ENGINE_PREDICTOR_CONTEXT_H_
#define NDSERVE_ENGINE_PREDICTOR_CONTEXT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "engine/inference_request.h"
#include "engine/model.h"
#include "engine/pinned_staging.h"
#include "kernels/dispatch.h"
#include "kernels/gpu_resources.h"
#include "kernels/kernel_context.h"
#include "kernels/tensor_view.h"
#include "memory/nd_array.h"
#include "memory/nd_manager.h"
#include "memory/pool.h"

namespace ndserve::engine {

class RunProfile;

// One request's run of a model's graph (docs/design.md §2): every byte it touches lives in a
// context-level NDManager under the predictor's manager, and Close() frees it all.
//
// Inputs are uploaded into the context, every node's outputs are created in it (the
// output scope is this context, never the manager of an op's first input, so a Gather
// from an embedding table cannot attach to the capped model manager), and shape-only
// ops (Reshape, Flatten, Squeeze, Unsqueeze, Identity) alias their input's array under a
// new shape; an alias is a slot of this object and dies with it. On the CPU each buffer
// is released as soon as no later node reads it (Graph::ReleasedAfter), which bounds a
// request's peak; on a GPU they stay until Close, because kernels queued on the stream
// may still read them and the pool is not stream-ordered.
//
// Host-placed nodes (Node::on_host: Shape, Size and the shape arithmetic after them) run
// their CPU kernels on host buffers with this request's real dims; a node whose host
// inputs they compute gets its attributes built here, per request. On the CPU device host
// and device memory are the same, so the host buffers are ordinary arrays of the context
// manager. On a GPU they live in a host-side context manager of their own, and a host
// value that a device node reads as data is uploaded once, on the predictor's stream.
//
// On a GPU with a pinned pool (docs/design.md §4.3) inputs are staged through pinned
// blocks (one host memcpy, one asynchronous H2D copy each), FetchOutputs queues one D2H
// copy per output into pinned blocks and then synchronizes the stream once, and a
// kernel's device-side error flag (Gather's out-of-range index) is read after that one
// synchronization instead of inside the kernel (KernelContext::defer_error_check), each
// node with its own flag slot so the error still names the node.
//
// Ownership: owns the context manager (closed by Close or the destructor, after the
// stream has drained; Detach leaves it open for a captured CUDA graph) and its pinned
// blocks. Borrows the model, the kernel table, the GPU resources and the pinned pool,
// which must outlive it. Not thread-safe: one request on one thread.
class PredictorContext : private kernels::ScratchAllocator {
 public:
  // `kernels` holds the kernel of each graph node: the CPU one for host-placed nodes,
  // else the one of this device; `gpu` is null on CPU. `pinned` (optional, GPU only) is
  // the pinned-host pool of the GPU; without it copies go from and to pageable memory.
  PredictorContext(const Model& model, absl::Span<const kernels::KernelFn> kernels,
                   const kernels::KernelContext& kernel_context, kernels::GpuResources* gpu,
                   std::shared_ptr<NDManager> manager, Pool* pinned = nullptr);
  ~PredictorContext();
  PredictorContext(const PredictorContext&) = delete;
  PredictorContext& operator=(const PredictorContext&) = delete;

  // Uploads graph input `input` (index into the model's inputs) from host bytes that
  // match `shape` (the caller validated them). On a GPU the upload is queued on the
  // predictor's stream, ahead of the kernels: `bytes` must stay valid until Close.
  absl::Status SetInput(int input, absl::Span<const int64_t> shape,
                        absl::Span<const uint8_t> bytes);
  // A zero-filled input, for warm-up.
  absl::Status SetZeroInput(int input, absl::Span<const int64_t> shape);
  // Runs every node. Errors are annotated with the node ("node 'fc0' (Gemm): ...").
  // CANCELLED, before the next node, once `cancel` (optional) reads true.
  // On a GPU it returns once the kernels are queued; CopyOutput and Close wait for them
  // (an error of a queued kernel surfaces there).
  absl::Status Run(const std::atomic<bool>* cancel = nullptr);
  // Copies graph outputs `outputs` (indices into the model's outputs) to host memory. On
  // a GPU: one D2H copy each, then the run's one stream synchronization, then the
  // device-side error flags (INVALID_ARGUMENT naming the node that raised one).
  absl::StatusOr<std::vector<InferOutputTensor>> FetchOutputs(absl::Span<const int> outputs);
  // FetchOutputs of one output.
  absl::StatusOr<InferOutputTensor> CopyOutput(int output);

  // Where graph input `input` / output `output` lives on the device, for a CUDA graph
  // that replays this run with other bytes (predictor.cc). FAILED_PRECONDITION when the
  // value is not a device buffer of its own.
  struct DeviceBuffer {
    void* data = nullptr;
    std::size_t bytes = 0;
    DType dtype = DType::kFp32;
    std::vector<int64_t> shape;
  };
  absl::StatusOr<DeviceBuffer> InputBuffer(int input) const;
  absl::StatusOr<DeviceBuffer> OutputBuffer(int output) const;

  // The status of a device-side error raised in flag slot `slot` (a node index) of a run
  // of `model`: INVALID_ARGUMENT naming the node.
  static absl::Status DeviceError(const Model& model, int slot);

  // The most bytes the context held at once so far.
  uint64_t peak_bytes() const { return peak_bytes_; }
  // The bytes of every node output made so far, as if none were ever released: what
  // the liveness plan (Graph::ReleasedAfter) saves is this minus peak_bytes().
  uint64_t output_bytes() const { return output_bytes_; }
  NDManager& manager() const { return *manager_; }
  // The working space every kernel call of Run gets (KernelContext::scratch).
  kernels::ScratchAllocator& scratch() { return *this; }

  // Waits for queued GPU work, then closes the context manager. Idempotent.
  absl::Status Close();
  // Ends the context without closing its manager, whose arrays a captured CUDA graph
  // keeps using: drops the handles, returns the pinned blocks, closes the host-side
  // manager. The caller must have synchronized the stream after the last queued work.
  absl::Status Detach();

 private:
  struct Slot {
    NDArray array;         // the storage (shared by aliases)
    kernels::Shape shape;  // this value's shape
    // On a GPU: `array` is in host memory (a host-placed node's output), and the device
    // copy made when a device node first read it.
    bool host = false;
    NDArray uploaded;
  };

  // The view a host-placed node reads for `value`.
  absl::StatusOr<kernels::TensorView> HostView(int value, bool shape_only);
  // The view a device node reads for `value`, uploading a host value first.
  absl::StatusOr<kernels::TensorView> DeviceView(int value);
  // The attributes of `node` for this request (see Node::has_dynamic_attrs).
  absl::StatusOr<kernels::OpAttrs> RequestAttrs(const Node& node);
  absl::Status RunNode(int n);
  // Whether node `n`'s guards (Node::guards) hold in this run.
  absl::StatusOr<bool> GuardsHold(const Node& node);
  // The value of BOOL `value` (one element), read once per run; on a GPU a device value
  // costs a copy to the host and a synchronization.
  absl::StatusOr<bool> Condition(int value);
  // An If: each output takes the slot of the taken branch's value.
  absl::Status RunIf(const Node& node);

  // A Loop (docs/design.md §4): sets the body's inputs, runs its nodes, hands the body's
  // carried values to the next iteration and keeps its scan values, until the trip count
  // or the body's condition ends it; then the outputs. Each iteration frees what it made
  // and nothing reads any more (on a GPU after a synchronization), so a loop's memory is
  // bounded by what it carries, not by its iteration count.
  absl::Status RunLoop(int n);
  struct LoopFrame;
  // The arrays made so far in the current iteration of the loop holding `scope` (a Loop
  // node; kNoValue: the top level, whose arrays live until Close).
  void NoteMade(const NDArray& array, int scope);
  // The Loop node whose body makes `value`; kNoValue at the top level.
  int ScopeOf(int value) const;
  // The slot a device node would read for `value` (a host value's uploaded copy).
  absl::StatusOr<Slot> DeviceSlot(int value);
  // The one element of `value` (a trip count, a condition), read on the host.
  absl::StatusOr<int64_t> HostScalar(int value, DType dtype, absl::string_view what);
  // A scalar the loop sets per iteration (the iteration number, the condition).
  absl::Status SetLoopScalar(int value, DType dtype, int64_t v, int scope);
  // Frees the arrays of `frame` that nothing the loop keeps refers to.
  absl::Status FreeDead(LoopFrame& frame, absl::Span<const Slot> live,
                        std::vector<NDArray>* scanned);
  // Scan output `scan` from its per-iteration values (ScanOutput).
  absl::StatusOr<Slot> Stack(const ScanOutput& scan, absl::Span<const Slot> parts,
                             absl::string_view name, int scope);
  // A copy of `slot` in a new array of this context.
  absl::StatusOr<Slot> Copy(const Slot& slot, absl::string_view name, int scope);
  // RunNode timed into `profile` (run_profile.h).
  absl::Status RunNodeProfiled(int n, RunProfile& profile);
  // The device buffer of graph value `value` (`what` names it in the error).
  absl::StatusOr<DeviceBuffer> BufferOf(int value, absl::string_view what) const;
  absl::Status EnsureHostManager();

  // kernels::ScratchAllocator: a byte array in the context manager, so working space is
  // accounted to the request and bounded by the pool. On the CPU the blocks of a node go
  // back to the pool once that node's kernel returned; on a GPU they stay until Close,
  // like intermediates, because queued kernels may still use them.
  absl::StatusOr<void*> Allocate(std::size_t bytes) override;
  void ReleaseScratch();

  absl::StatusOr<kernels::TensorView> View(int value) const;
  void NotePeak();

  const Model& model_;
  const absl::Span<const kernels::KernelFn> kernels_;
  kernels::GpuResources* const gpu_;
  std::shared_ptr<NDManager> manager_;
  // Where host-placed nodes' outputs live: manager_ itself on the CPU, a host-side
  // context manager (made on first use) on a GPU.
  std::shared_ptr<NDManager> host_manager_;
  std::vector<Slot> slots_;  // per graph value
  absl::flat_hash_map<int, bool> conditions_;  // If conditions read in this run
  // The loops running now, innermost last.
  std::vector<LoopFrame*> frames_;
  const std::atomic<bool>* cancel_ = nullptr;
  int current_scope_ = kNoValue;  // the loop of the node running now
  // The predictor's kernel context with `scratch` pointing at this context.
  kernels::KernelContext node_context_;
  // The same for host-placed nodes: the CPU, with scratch from host_manager_.
  kernels::KernelContext host_context_;
  NDManager* scratch_manager_ = nullptr;  // where Allocate takes blocks from now
  bool scratch_on_host_ = false;
  std::vector<NDArray> scratch_;  // blocks to free after the current node
  Pool* const pinned_;
  PinnedStaging staging_;
  // Work was queued on the stream since its last synchronization.
  bool queued_ = false;
  // Device error flags are read after the run (one slot per node), not inside kernels.
  bool defer_errors_ = false;
  uint64_t peak_bytes_ = 0;
  uint64_t output_bytes_ = 0;
  bool closed_ = false;
};

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_PREDICTOR_CONTEXT_H_
