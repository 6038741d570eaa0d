#ifndef NDSERVE_ENGINE_MODEL_CONFIG_H_
#define NDSERVE_ENGINE_MODEL_CONFIG_H_

// A model's configuration: the subset of Triton's ModelConfig that ndserve uses, as a
// plain C++ struct so that engine headers stay free of protobuf. model_config.cc parses
// config.pbtxt with protobuf's text format into inference::ModelConfig
// (proto/model_config.proto, Triton's field numbers) and converts it.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/tensor_spec.h"

namespace ndserve::engine {

// Range limits checked at load (docs/design.md §4). Beyond them a config is refused with
// INVALID_ARGUMENT naming the field and the file: every one of these values makes the
// process allocate or wait in proportion (predictors, batch buffers, a batcher's timer),
// so an unchecked typo or a hostile config could take the whole daemon down.
inline constexpr int kMaxInstanceCount = 1024;  // per instance_group and summed over them
inline constexpr int kMaxBatchSizeLimit = 1 << 20;
inline constexpr uint64_t kMaxQueueDelayMicroseconds = 3'600'000'000;  // one hour
// Each level has a queue counter in the batcher, so the count is bounded like the rest.
inline constexpr uint64_t kMaxPriorityLevels = 1024;

struct InstanceGroupConfig {
  enum class Kind { kAuto, kGpu, kCpu, kModel };
  std::string name;
  int count = 1;          // predictors per listed GPU (or in all, for CPU)
  std::vector<int> gpus;  // empty: every GPU present
  Kind kind = Kind::kAuto;
};

// Triton's ModelQueuePolicy: what happens to requests that wait too long or arrive
// while the queue is full (docs/design.md §5).
struct QueuePolicyConfig {
  enum class TimeoutAction { kReject, kDelay };
  TimeoutAction timeout_action = TimeoutAction::kReject;
  uint64_t default_timeout_microseconds = 0;  // 0: no timeout
  bool allow_timeout_override = false;        // the request's "timeout" parameter wins
  uint32_t max_queue_size = 0;                // 0: no limit

  bool operator==(const QueuePolicyConfig&) const = default;
};

struct DynamicBatchingConfig {
  std::vector<int> preferred_batch_sizes;
  uint64_t max_queue_delay_microseconds = 0;
  bool preserve_ordering = false;
  QueuePolicyConfig default_queue_policy;
  // Triton's priority levels: 1 is served first; 0 levels: no priorities.
  uint64_t priority_levels = 0;
  uint64_t default_priority_level = 0;
  std::map<uint64_t, QueuePolicyConfig> priority_queue_policy;  // level -> its policy
};

// Which versions of a model are served. Triton's default is the latest one.
struct VersionPolicy {
  enum class Kind { kLatest, kAll, kSpecific };
  Kind kind = Kind::kLatest;
  uint32_t num_versions = 1;      // kLatest
  std::vector<int64_t> versions;  // kSpecific
};

// A plain value. `inputs`/`outputs` dims are as config.pbtxt states them: without the
// batch dimension when max_batch_size > 0.
struct ModelConfig {
  std::string name;
  std::string platform;
  std::string backend;
  std::string default_model_filename;  // empty: model.onnx
  int max_batch_size = 0;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  std::vector<InstanceGroupConfig> instance_groups;
  std::optional<DynamicBatchingConfig> dynamic_batching;
  VersionPolicy version_policy;
  // parameters { key: "cuda_graphs" value: { string_value: "false" } }: whether a GPU
  // predictor may capture its runs as CUDA graphs (docs/design.md §4.3).
  bool cuda_graphs = true;
  // parameters { key: "tf32" value: { string_value: "true" } }: whether a GPU predictor's
  // FP32 GEMMs may use TF32 tensor cores (10-bit mantissa products, FP32 accumulation).
  bool tf32 = false;
  // parameters { key: "cublaslt" value: { string_value: "false" } }: whether a GPU
  // predictor runs Gemm/MatMul products with a per-column bias and/or Relu as one
  // cuBLASLt call with them in its epilogue (default) or as the cuBLAS product with
  // kernels of their own around it.
  bool cublaslt = true;
  // parameters { key: "pad_batches" value: { string_value: "true" } }: whether merged
  // dynamic batches grow to the next power of two rows (at most max_batch_size), the
  // extra rows repeating the last one and cut from the answers. Unset: on where the
  // model runs on a GPU with cuda_graphs, so that a predictor sees a handful of batch
  // shapes, which its graph cache keeps, instead of one per row count.
  std::optional<bool> pad_batches;

  // The model file name inside a version directory.
  std::string ModelFilename() const {
    return default_model_filename.empty() ? "model.onnx" : default_model_filename;
  }
  // Predictors per device: the sum of the instance groups' counts (1 without groups),
  // saturated at INT32_MAX.
  int InstanceCount() const;
};

// Parses config.pbtxt text. Unknown Triton fields are ignored (they may be set in a
// Triton config we do not use); syntax errors, unknown enum values, a non-ONNX
// platform/backend, duplicate tensor names, bad dims, TYPE_INVALID, tensor names beyond
// kMaxNameBytes or not UTF-8, and values out of range (max_batch_size outside
// [0, kMaxBatchSizeLimit], an instance_group count outside [0, kMaxInstanceCount] or
// counts summing past it, a negative gpu, max_queue_delay_microseconds past one hour,
// a preferred_batch_size outside [1, max_batch_size], a `cuda_graphs`, `tf32`,
// `cublaslt` or `pad_batches` parameter other than true or false) are INVALID_ARGUMENT naming `what` and the field. Other
// `parameters` are ignored. Thread-safe.
absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view text, absl::string_view what);

// Reads and parses a config.pbtxt file; NOT_FOUND if it does not exist.
absl::StatusOr<ModelConfig> ReadModelConfig(const std::string& path);

// The config as config.pbtxt text (Triton's spelling), e.g. for the ModelConfig RPC.
std::string ModelConfigToText(const ModelConfig& config);

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_MODEL_CONFIG_H_
