#ifndef NDSERVE_SERVER_MODEL_MEMORY_SOURCE_H_
#define NDSERVE_SERVER_MODEL_MEMORY_SOURCE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/model_memory.h"
#include "proto/inference.pb.h"

namespace ndserve {

namespace engine {
class Engine;
}  // namespace engine

// One row of per-model memory (docs/design.md §2, "Exact memory per model"): what the
// gauge ndserve_model_memory_bytes and the admin status show.
struct ModelMemorySample {
  std::string model;
  std::string version;
  std::string device;  // "cpu:0", "cuda:1"
  std::string kind;    // "parameters", "workspace", "state"
  std::uint64_t bytes = 0;
};
// Called at scrape and admin time; must be thread-safe.
using ModelMemorySource = std::function<std::vector<ModelMemorySample>()>;

// Every loaded version of `engine` (borrowed; it must outlive the source), summed from
// its manager tree when called.
ModelMemorySource EngineModelMemory(const engine::Engine* engine);

// Triton's ModelStatistics.memory_usage: one MemoryUsage{type "CPU"/"GPU", id the device
// ordinal, byte_size all kinds together} per device.
void FillMemoryUsage(const std::vector<engine::ModelMemoryUsage>& usage,
                     google::protobuf::RepeatedPtrField<::inference::MemoryUsage>* out);

}  // namespace ndserve

#endif  // NDSERVE_SERVER_MODEL_MEMORY_SOURCE_H_
