#include "server/shutdown_signal.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "base/logging.h"

namespace ndserve {
namespace {

sigset_t ShutdownSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

int Wait() {
  const sigset_t set = ShutdownSet();
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  return sig;
}

}  // namespace

void BlockShutdownSignals() {
  const sigset_t set = ShutdownSet();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int WaitForShutdownSignal() {
  const int sig = Wait();
  std::thread([] {
    const int again = Wait();
    LOG(WARNING) << "second " << strsignal(again) << ": exiting without finishing the drain";
    std::_Exit(128 + again);
  }).detach();
  return sig;
}

}  // namespace ndserve
