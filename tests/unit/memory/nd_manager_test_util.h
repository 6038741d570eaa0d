#ifndef NDSERVE_TESTS_UNIT_MEMORY_ND_MANAGER_TEST_UTIL_H_
#define NDSERVE_TESTS_UNIT_MEMORY_ND_MANAGER_TEST_UTIL_H_

#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "memory/memory_system.h"
#include "memory/nd_manager.h"

namespace ndserve::testing_util {

// The value of an OK StatusOr; fails the test (and returns a default) otherwise.
template <typename T>
T Must(absl::StatusOr<T> value) {
  EXPECT_TRUE(value.ok()) << value.status();
  if (!value.ok()) return T();
  return *std::move(value);
}

// A fixture with a memory system of its own (default config: binned pool, no limit), so
// that pool stats, level counts and dumps see only what the test made.
class ScopeTest : public ::testing::Test {
 protected:
  std::shared_ptr<NDManager> Base(ManagerLevel level, absl::string_view name = {}) {
    return Must(memory_.NewBaseManager(Device::Cpu(), level, name));
  }
  std::shared_ptr<NDManager> System() { return Must(memory_.SystemManager(Device::Cpu())); }
  // The CPU pool every manager of this test's memory system allocates from.
  Pool& CpuPool() { return *Must(memory_.GetPool(Device::Cpu())); }
  std::uint64_t AllocatedBytes() { return CpuPool().Stats().allocated_bytes; }

  MemorySystem memory_;
};

inline bool IsFreedError(const absl::Status& status) {
  return absl::IsFailedPrecondition(status) &&
         status.message().find("use of freed memory") != absl::string_view::npos;
}

}  // namespace ndserve::testing_util

#endif  // NDSERVE_TESTS_UNIT_MEMORY_ND_MANAGER_TEST_UTIL_H_
