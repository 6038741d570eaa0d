#include "memory/memory_system.h"

#include <algorithm>
#include <utility>

namespace ndserve {

MemorySystem::MemorySystem(const MemoryConfig& config) : pools_(config) {}

MemorySystem::~MemorySystem() {
  std::vector<std::shared_ptr<NDManager>> managers;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [device, manager] : managers_) managers.push_back(std::move(manager));
    managers_.clear();
  }
  // Before pools_ goes: every array still attached anywhere in the trees is freed into
  // its pool now, while the pool is alive.
  for (const std::shared_ptr<NDManager>& manager : managers) manager->CloseSystem();
}

absl::StatusOr<std::shared_ptr<NDManager>> MemorySystem::SystemManager(Device device) {
  absl::MutexLock lock(&mu_);
  if (auto it = managers_.find(device); it != managers_.end()) return it->second;
  absl::StatusOr<Pool*> pool = pools_.Get(device);
  if (!pool.ok()) return pool.status();
  std::shared_ptr<NDManager> manager = NDManager::NewSystemManager(device, *pool, &counters_);
  managers_.emplace(device, manager);
  return manager;
}

absl::StatusOr<std::shared_ptr<NDManager>> MemorySystem::NewBaseManager(Device device,
                                                                        ManagerLevel level,
                                                                        absl::string_view name) {
  absl::StatusOr<std::shared_ptr<NDManager>> system = SystemManager(device);
  if (!system.ok()) return system.status();
  return (*system)->NewSubManager(level, name);
}

std::vector<std::shared_ptr<NDManager>> MemorySystem::AllSystemManagers() const {
  std::vector<std::shared_ptr<NDManager>> out;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [device, manager] : managers_) out.push_back(manager);
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a->device() < b->device(); });
  return out;
}

std::vector<ManagerNodeInfo> MemorySystem::DebugInfoAll(bool with_blocks) const {
  std::vector<ManagerNodeInfo> out;
  for (const auto& system : AllSystemManagers()) out.push_back(system->DebugInfo(with_blocks));
  return out;
}

std::string MemorySystem::DebugDumpAll() const {
  std::string out;
  for (const auto& system : AllSystemManagers()) out += system->DebugDump();
  return out;
}

ManagerLevelSnapshot MemorySystem::LevelCounts() const {
  ManagerLevelSnapshot snapshot = counters_.Read();
  for (const auto& system : AllSystemManagers()) system->AccumulateLevels(&snapshot);
  return snapshot;
}

}  // namespace ndserve
