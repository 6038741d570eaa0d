#ifndef NDSERVE_MEMORY_MEMORY_SYSTEM_H_
#define NDSERVE_MEMORY_MEMORY_SYSTEM_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "memory/device.h"
#include "memory/device_pools.h"
#include "memory/memory_config.h"
#include "memory/pool.h"

namespace ndserve {

// The process-wide memory system: one DevicePools, shared by every NDManager.
//
// The pools are built on first use, from the config given to ConfigureMemory or, if it
// was never called, from the environment (NDSERVE_MEMORY_POOL, NDSERVE_MEMORY_LIMIT,
// NDSERVE_DEBUG_LEVEL). The DevicePools object is never destroyed: arrays of the
// system managers may be freed during static destruction. Thread-safe.

// Sets the configuration. Call it once, before anything allocates (the daemon does so
// from its flags). FAILED_PRECONDITION if the pools were already built with another
// configuration; OK (and nothing changes) if with the same one.
absl::Status ConfigureMemory(const MemoryConfig& config);

// The pools, built on first call. Returns the environment's error if ConfigureMemory
// was not called and the environment holds a bad value (the next call tries again).
absl::StatusOr<DevicePools*> TryGlobalPools();

// As TryGlobalPools, but a bad environment is fatal: logs the error naming the variable
// and aborts. For code that cannot report a status (start-up paths, benchmarks).
DevicePools& GlobalPools();

// The pool of `device` (FAILED_PRECONDITION for a CUDA device that is not present).
absl::StatusOr<Pool*> GlobalPool(Device device);

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_MEMORY_SYSTEM_H_
