# Sourced by the benchmark scripts that start a daemon: `server_pid` holds the pid of the
# one they started, and stop_server stops that process only (SIGTERM, then waits for it).
server_pid=""
stop_server() {
  if [[ -n $server_pid ]]; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
  fi
}
