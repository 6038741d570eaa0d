#include "engine/instance_placement.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ndserve::engine {
namespace {

std::string GroupName(const InstanceGroupConfig& g, size_t index) {
  return g.name.empty() ? absl::StrCat("instance_group ", index)
                        : absl::StrCat("instance_group '", g.name, "'");
}

std::string VisibleGpus(int visible_gpus) {
  if (visible_gpus <= 0) return "no GPU is visible";
  if (visible_gpus == 1) return "1 GPU is visible (cuda:0)";
  return absl::StrCat(visible_gpus, " GPUs are visible (cuda:0 to cuda:", visible_gpus - 1, ")");
}

}  // namespace

absl::StatusOr<std::vector<InstancePlacement>> PlaceInstances(
    absl::Span<const InstanceGroupConfig> groups, int visible_gpus, Device daemon_device) {
  if (groups.empty()) return std::vector<InstancePlacement>{{daemon_device, 1}};
  std::vector<InstancePlacement> out;
  // Summed wide: a long `gpus` list times a large count must not overflow before the
  // limit check refuses it.
  int64_t total = 0;
  auto add = [&](Device device, int count) {
    if (count <= 0) return;
    total += count;
    for (InstancePlacement& p : out) {
      if (p.device == device) {
        // Capped so the per-device count stays an int; the total check refuses it anyway.
        p.count = static_cast<int>(std::min<int64_t>(int64_t{p.count} + count, INT32_MAX));
        return;
      }
    }
    out.push_back({device, count});
  };
  for (size_t i = 0; i < groups.size(); ++i) {
    const InstanceGroupConfig& g = groups[i];
    switch (g.kind) {
      case InstanceGroupConfig::Kind::kCpu:
        add(Device::Cpu(), g.count);
        break;
      case InstanceGroupConfig::Kind::kAuto:
      case InstanceGroupConfig::Kind::kModel:
        add(daemon_device, g.count);
        break;
      case InstanceGroupConfig::Kind::kGpu:
        if (!daemon_device.is_cuda()) {
          return absl::FailedPreconditionError(
              absl::StrCat(GroupName(g, i), " is KIND_GPU, but the engine runs on ",
                           daemon_device.ToString(), " (start the daemon with --device=cuda:N)"));
        }
        if (g.gpus.empty()) {
          add(daemon_device, g.count);
          break;
        }
        for (int gpu : g.gpus) {
          if (gpu < 0 || gpu >= visible_gpus) {
            return absl::FailedPreconditionError(absl::StrCat(
                GroupName(g, i), " lists gpu ", gpu, ", but ", VisibleGpus(visible_gpus)));
          }
          add(Device::Cuda(gpu), g.count);
        }
        break;
    }
  }
  if (total > kMaxInstanceCount) {
    return absl::InvalidArgumentError(
        absl::StrCat("instance groups place ", total, " predictors over ", out.size(),
                     " device(s); at most ", kMaxInstanceCount, " are allowed"));
  }
  // Only groups built in code can have count 0 (the parser reads 0 as Triton's 1);
  // like ModelConfig::InstanceCount, nothing placed still means one predictor.
  if (out.empty()) out.push_back({daemon_device, 1});
  return out;
}

int TotalInstances(absl::Span<const InstancePlacement> placements) {
  int total = 0;
  for (const InstancePlacement& p : placements) total += p.count;
  return total;
}

}  // namespace ndserve::engine
