#ifndef NDSERVE_SERVER_SHUTDOWN_SIGNAL_H_
#define NDSERVE_SERVER_SHUTDOWN_SIGNAL_H_

#include <atomic>

#include "absl/time/time.h"

namespace ndserve {

// SIGTERM / SIGINT for the daemon (docs/design.md §6). Shutdown runs as ordinary code in
// main (locks, logging, gRPC calls), never inside a signal handler: the handler only
// records the signal and posts a semaphore that a dedicated thread waits on.
//
// Why a handler and not only sigwait: threads a library starts before main (OpenBLAS
// starts its pool in a constructor) do not block the signals, and while main was busy
// loading models the kernel delivered SIGTERM to one of them, whose default action killed
// the process without a log line. With a handler installed no thread ever takes the
// default action.
//
// After the first signal the process ends, whatever happens: a second signal exits at
// once (status 128 + signal), and when the shutdown has not finished within the exit
// timeout plus 1 s (a model still loading, a graph node that will not stop) it exits
// with status 1, both with a log line.
//
// All functions are thread-safe; Install must be called first.

// Installs the handler, blocks the signals in the calling thread (and so in every thread
// it creates afterwards) and starts the receiving thread. Call first thing in main,
// before any library starts threads.
void InstallShutdownSignals();

// The exit timeout (--exit_timeout_seconds) the backstop adds its 1 s to; 30 s until set.
void SetShutdownExitTimeout(absl::Duration timeout);

// Whether a shutdown signal has arrived.
bool ShutdownRequested();
// A flag that turns true the moment the first signal arrives (set in the handler), for
// work that can stop early: the engine's start-up loads (EngineOptions::stop_loading).
const std::atomic<bool>* ShutdownFlag();

// Waits for SIGTERM or SIGINT (returns at once if one came during start-up) and returns
// its number. A signal that arrives before this is first called is logged as arriving
// during start-up.
int WaitForShutdownSignal();

}  // namespace ndserve

#endif  // NDSERVE_SERVER_SHUTDOWN_SIGNAL_H_
