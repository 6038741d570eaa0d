#ifndef NDSERVE_SERVER_SHUTDOWN_SIGNAL_H_
#define NDSERVE_SERVER_SHUTDOWN_SIGNAL_H_

namespace ndserve {

// SIGTERM / SIGINT handling without signal handlers: the signals are blocked in every
// thread and taken synchronously with sigwait, so shutdown runs as ordinary code
// (locks, logging, gRPC calls) instead of inside an async-signal context.

// Blocks SIGTERM and SIGINT in the calling thread and in every thread it creates
// afterwards. Call first thing in main, before gRPC or any library starts threads.
void BlockShutdownSignals();

// Waits for SIGTERM or SIGINT and returns its number. Afterwards a second signal ends
// the process at once (exit status 128 + signal), for an operator who will not wait for
// the drain.
int WaitForShutdownSignal();

}  // namespace ndserve

#endif  // NDSERVE_SERVER_SHUTDOWN_SIGNAL_H_
