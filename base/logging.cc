#include "base/logging.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/text.h"

namespace ndserve::logging {
namespace {

// Long enough for a start-up summary of every failed model; short enough that a line
// stays one write(2) a reader can take in.
constexpr size_t kMaxLogLineBytes = 16 * 1024;

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
  // Log lines quote names and errors that clients and model files control: keep each
  // line valid UTF-8 (log shippers reject or mangle the rest) and bounded, so that a
  // hostile request cannot write hundreds of kilobytes per line.
  std::string text = SafeUtf8(stream_.str(), kMaxLogLineBytes);
  text += '\n';
  ssize_t ignored = ::write(STDERR_FILENO, text.data(), text.size());
  (void)ignored;
}

}  // namespace ndserve::logging
