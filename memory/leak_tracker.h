#ifndef NDSERVE_MEMORY_LEAK_TRACKER_H_
#define NDSERVE_MEMORY_LEAK_TRACKER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace ndserve {

struct OutstandingAllocation {
  std::uintptr_t address = 0;
  std::uint64_t bytes = 0;
  std::string owner;        // the manager that asked, when it said
  std::string stack_trace;  // symbolized frames, one per line (debug level 2 only)
};

// Remembers every live allocation of one pool so that memory_status can say who holds
// what. Level 0: does nothing (the pool still counts). Level 1: address, size, owner.
// Level 2: also the raw call stack, symbolized only when someone asks for the list, so
// the per-allocation cost is one unwind. Thread-safe (its own mutex, never taken at
// level 0).
class LeakTracker {
 public:
  explicit LeakTracker(int level) : level_(level) {}

  int level() const { return level_; }
  // Inline level checks keep level 0 free of calls on the pools' hot paths.
  void Record(const void* ptr, std::uint64_t bytes, absl::string_view owner) {
    if (level_ > 0) RecordSlow(ptr, bytes, owner);
  }
  void Erase(const void* ptr) {
    if (level_ > 0) EraseSlow(ptr);
  }
  // Sorted by address.
  std::vector<OutstandingAllocation> List() const;

 private:
  static constexpr int kMaxFrames = 24;
  void RecordSlow(const void* ptr, std::uint64_t bytes, absl::string_view owner);
  void EraseSlow(const void* ptr);

  struct Entry {
    std::uint64_t bytes = 0;
    std::string owner;
    int depth = 0;
    void* frames[kMaxFrames];
  };

  const int level_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::uintptr_t, Entry> live_ ABSL_GUARDED_BY(mu_);
};

// Symbolizes stack traces from the running binary. Call once from main() with argv[0]
// (tests call it from their main); harmless to call more than once.
void InitializeSymbolizer(const char* argv0);

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_LEAK_TRACKER_H_
