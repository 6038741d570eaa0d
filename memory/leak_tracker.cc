#include "memory/leak_tracker.h"

#include <algorithm>
#include <atomic>

#include "absl/debugging/stacktrace.h"
#include "absl/debugging/symbolize.h"
#include "absl/strings/str_format.h"

namespace ndserve {
namespace {

std::string Symbolize(void* const* frames, int depth) {
  std::string out;
  char name[1024];
  for (int i = 0; i < depth; ++i) {
    // Return addresses point after the call; step back one byte so the symbol is the
    // caller's even when the call is its last instruction.
    void* pc = static_cast<char*>(frames[i]) - 1;
    const char* symbol = absl::Symbolize(pc, name, sizeof(name)) ? name : "(unknown)";
    absl::StrAppendFormat(&out, "  #%d %p %s\n", i, frames[i], symbol);
  }
  return out;
}

}  // namespace

void InitializeSymbolizer(const char* argv0) {
  static std::atomic<bool> done{false};
  if (!done.exchange(true)) absl::InitializeSymbolizer(argv0);
}

void LeakTracker::RecordSlow(const void* ptr, std::uint64_t bytes, absl::string_view owner) {
  if (ptr == nullptr) return;
  Entry entry;
  entry.bytes = bytes;
  entry.owner = std::string(owner);
  // Skip this frame (Record is inline): the trace starts in the pool's allocation
  // path, a frame or three, and goes on into whoever asked.
  if (level_ >= 2) entry.depth = absl::GetStackTrace(entry.frames, kMaxFrames, 1);
  absl::MutexLock lock(&mu_);
  live_[reinterpret_cast<std::uintptr_t>(ptr)] = std::move(entry);
}

void LeakTracker::EraseSlow(const void* ptr) {
  if (ptr == nullptr) return;
  absl::MutexLock lock(&mu_);
  live_.erase(reinterpret_cast<std::uintptr_t>(ptr));
}

std::vector<OutstandingAllocation> LeakTracker::List() const {
  std::vector<OutstandingAllocation> out;
  if (level_ <= 0) return out;
  std::vector<std::pair<std::uintptr_t, Entry>> copy;
  {
    absl::MutexLock lock(&mu_);
    copy.assign(live_.begin(), live_.end());
  }
  // Symbolizing reads the binary's symbol table: slow, so never under the lock that
  // allocations take.
  out.reserve(copy.size());
  for (const auto& [address, entry] : copy) {
    out.push_back({address, entry.bytes, entry.owner, Symbolize(entry.frames, entry.depth)});
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.address < b.address; });
  return out;
}

}  // namespace ndserve
