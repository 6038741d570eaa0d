#ifndef NDSERVE_ENGINE_INSTANCE_PLACEMENT_H_
#define NDSERVE_ENGINE_INSTANCE_PLACEMENT_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/model_config.h"
#include "memory/device.h"

namespace ndserve::engine {

// How many predictors of a model run on one device.
struct InstancePlacement {
  Device device;
  int count = 0;

  friend bool operator==(const InstancePlacement&, const InstancePlacement&) = default;
};

// Where a model's instance groups put its predictors (docs/design.md §4, "Instance
// placement"), as a pure function of the config and the machine so that every case is
// unit-tested without a GPU:
//  - no groups: one predictor on `daemon_device` (the daemon's --device);
//  - KIND_CPU: `count` on the CPU;
//  - KIND_GPU: `count` on every listed GPU (Triton's rule); no `gpus`: on
//    `daemon_device`, which must then be a GPU;
//  - KIND_AUTO, KIND_MODEL: `count` on `daemon_device`.
// Several groups (or a GPU listed twice) naming one device add up. The result has one
// entry per device, in the order the config first names them; groups that place
// nothing (count 0, only possible for configs built in code) leave one predictor on
// `daemon_device`, as ModelConfig::InstanceCount does.
// Errors: FAILED_PRECONDITION for KIND_GPU on a daemon running on the CPU, or a listed
// GPU ordinal at or past `visible_gpus` (the message names the group, the ordinal and
// the GPUs present); INVALID_ARGUMENT when the placements add up to more than
// kMaxInstanceCount predictors. Thread-safe (no state).
absl::StatusOr<std::vector<InstancePlacement>> PlaceInstances(
    absl::Span<const InstanceGroupConfig> groups, int visible_gpus, Device daemon_device);

// The predictors a placement creates in all.
int TotalInstances(absl::Span<const InstancePlacement> placements);

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_INSTANCE_PLACEMENT_H_
