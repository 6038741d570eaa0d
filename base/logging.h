#ifndef NDSERVE_BASE_LOGGING_H_
#define NDSERVE_BASE_LOGGING_H_

// Minimal LOG(INFO|WARNING|ERROR) << ... in Abseil's style. Debian 12 ships Abseil
// 20220623, which predates absl/log; this keeps call sites identical to absl's so the
// header can be swapped for "absl/log/log.h" once the distribution has it.
// Each statement becomes one write(2) of one line, so lines from threads never mix.
// Lines are made valid UTF-8 and cut at 16 KiB (base/text.h).

#include <sstream>

namespace ndserve::logging {

enum class Severity { kInfo, kWarning, kError };

class LogMessage {
 public:
  LogMessage(Severity severity, const char* file, int line);
  ~LogMessage();
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  std::ostream& stream() { return stream_; }

 private:
  Severity severity_;
  std::ostringstream stream_;
};

// Below this severity nothing is printed (tests raise it to keep output short).
void SetMinSeverity(Severity severity);

}  // namespace ndserve::logging

#define NDSERVE_LOG_INFO ::ndserve::logging::Severity::kInfo
#define NDSERVE_LOG_WARNING ::ndserve::logging::Severity::kWarning
#define NDSERVE_LOG_ERROR ::ndserve::logging::Severity::kError
#define LOG(severity) \
  ::ndserve::logging::LogMessage(NDSERVE_LOG_##severity, __FILE__, __LINE__).stream()

#endif  // NDSERVE_BASE_LOGGING_H_
