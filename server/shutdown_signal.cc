#include "server/shutdown_signal.h"

#include <pthread.h>
#include <semaphore.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "base/logging.h"

namespace ndserve {
namespace {

// How long past the exit timeout the backstop waits before ending the process itself.
constexpr absl::Duration kBackstopGrace = absl::Seconds(1);

// Written by the handler: lock-free atomics and sem_post are async-signal-safe.
sem_t g_posted;
std::atomic<int> g_last_signal{0};
std::atomic<bool> g_requested{false};
// Whether start-up was still running when the first signal came. Decided in the handler:
// by the time the receiving thread runs, main may have finished the loads the signal
// cancelled and reached WaitForShutdownSignal.
std::atomic<bool> g_signal_during_startup{false};

// Read by the handler and the receiving thread.
std::atomic<int64_t> g_exit_timeout_ms{30000};
std::atomic<bool> g_waiting{false};  // main reached WaitForShutdownSignal: start-up is over

absl::Mutex g_mu;
int g_first_signal ABSL_GUARDED_BY(g_mu) = 0;

void OnSignal(int sig) {
  const int saved_errno = errno;
  g_last_signal.store(sig);
  if (!g_requested.exchange(true)) g_signal_during_startup.store(!g_waiting.load());
  sem_post(&g_posted);
  errno = saved_errno;
}

sigset_t ShutdownSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

void WaitPosted() {
  while (sem_wait(&g_posted) != 0) {
  }
}

// The receiving thread: the first signal starts the shutdown (main does the work), a
// second one or the backstop ends the process.
void Receive() {
  const sigset_t set = ShutdownSet();
  // The one thread of ours that takes the signals (the others have them blocked), so that
  // they are never left pending when no foreign thread exists.
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  WaitPosted();
  const int sig = g_last_signal.load();
  {
    absl::MutexLock lock(&g_mu);
    g_first_signal = sig;
  }
  const absl::Duration limit = absl::Milliseconds(g_exit_timeout_ms.load()) + kBackstopGrace;
  if (g_signal_during_startup.load()) {
    LOG(WARNING) << "received " << strsignal(sig)
                 << " during start-up: stopping the model loads and shutting down (exit status 1 "
                    "if that takes over "
                 << absl::FormatDuration(limit) << ")";
  }
  const absl::Time deadline = absl::Now() + limit;
  const timespec until = absl::ToTimespec(deadline);
  while (true) {
    if (sem_timedwait(&g_posted, &until) == 0) {
      const int again = g_last_signal.load();
      LOG(WARNING) << "second " << strsignal(again) << ": exiting without finishing the drain";
      std::_Exit(128 + again);
    }
    if (errno == ETIMEDOUT) {
      LOG(ERROR) << "shutdown did not finish within the exit timeout plus "
                 << absl::FormatDuration(kBackstopGrace) << ": exiting with status 1";
      std::_Exit(EXIT_FAILURE);
    }
  }
}

}  // namespace

void InstallShutdownSignals() {
  sem_init(&g_posted, /*pshared=*/0, /*value=*/0);
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  const sigset_t set = ShutdownSet();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread(Receive).detach();
}

void SetShutdownExitTimeout(absl::Duration timeout) {
  g_exit_timeout_ms.store(absl::ToInt64Milliseconds(timeout));
}

bool ShutdownRequested() { return g_requested.load(); }

const std::atomic<bool>* ShutdownFlag() { return &g_requested; }

int WaitForShutdownSignal() {
  g_waiting.store(true);
  absl::MutexLock lock(&g_mu);
  g_mu.Await(absl::Condition(
      +[](int* sig) { return *sig != 0; }, &g_first_signal));
  return g_first_signal;
}

}  // namespace ndserve
