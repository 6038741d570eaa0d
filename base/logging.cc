#include "base/logging.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ndserve::logging {
namespace {

std::atomic<int> min_severity{static_cast<int>(Severity::kInfo)};

const char* Basename(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

}  // namespace

void SetMinSeverity(Severity severity) { min_severity.store(static_cast<int>(severity)); }

LogMessage::LogMessage(Severity severity, const char* file, int line) : severity_(severity) {
  static constexpr char kLetters[] = {'I', 'W', 'E'};
  const absl::Time now = absl::Now();
  stream_ << kLetters[static_cast<int>(severity)]
          << absl::FormatTime("%m%d %H:%M:%E6S", now, absl::UTCTimeZone())
          << absl::StrFormat(" %7d %s:%d] ", static_cast<int>(syscall(SYS_gettid)),
                             Basename(file), line);
}

LogMessage::~LogMessage() {
  if (static_cast<int>(severity_) < min_severity.load(std::memory_order_relaxed)) return;
  stream_ << '\n';
  const std::string text = stream_.str();
  ssize_t ignored = ::write(STDERR_FILENO, text.data(), text.size());
  (void)ignored;
}

}  // namespace ndserve::logging
