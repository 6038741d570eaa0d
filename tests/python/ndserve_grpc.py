"""Python stubs for ndserve's protos, for tests and scripts.

The modules are generated at build time (proto/CMakeLists.txt, target
ndserve_proto_python): messages by `protoc --python_out`, service stubs by Debian's
grpc_python_plugin (Debian has no grpc_tools). They land in <build>/proto/python; set
NDSERVE_PROTO_PYTHON_DIR to that folder (ctest does) and import from here:

    from ndserve_grpc import inference_pb2, inference_pb2_grpc, admin_pb2, ...

Run with Debian's /usr/bin/python3, which has python3-grpcio and python3-protobuf.
"""

import os
import random
import socket
import sys
import time

_DIR = os.environ.get("NDSERVE_PROTO_PYTHON_DIR")
if not _DIR:
    raise ImportError("set NDSERVE_PROTO_PYTHON_DIR to <build>/proto/python")
if _DIR not in sys.path:
    sys.path.insert(0, _DIR)

import admin_pb2  # noqa: E402
import admin_pb2_grpc  # noqa: E402
import health_pb2  # noqa: E402
import health_pb2_grpc  # noqa: E402
import inference_pb2  # noqa: E402
import inference_pb2_grpc  # noqa: E402
import model_config_pb2  # noqa: E402
import train_pb2  # noqa: E402
import train_pb2_grpc  # noqa: E402

__all__ = [
    "admin_pb2", "admin_pb2_grpc", "health_pb2", "health_pb2_grpc", "inference_pb2",
    "inference_pb2_grpc", "model_config_pb2", "train_pb2", "train_pb2_grpc", "free_port",
    "UNLIMITED", "start_daemon", "StartedDaemon", "wait_grpc_ready", "wait_models_ready",
    "wait_http_ok",
    "scrape_value",
]

# Channel options without gRPC's 4 MiB message cap, as the daemon has none.
UNLIMITED = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]


def _ephemeral_floor():
    """Lowest port the kernel hands out to outgoing connections (ip_local_port_range)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago.

    Drawn at random below the kernel's ephemeral range: a port from bind(0) is an ephemeral
    one, which the kernel may hand to any client socket (another test's gRPC channel, a
    Prometheus scrape) before the daemon binds it; CI saw exactly that as "Address already
    in use". Below the range only another listener can take it, and the draw makes two
    tests picking the same port unlikely.
    """
    floor = _ephemeral_floor()
    low = 20000 if floor > 21000 else 1024
    rng = random.SystemRandom()
    while True:
        port = rng.randrange(low, floor)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


def wait_grpc_ready(proc, port, timeout=120):
    """True once the daemon `proc` answers readiness SERVING on 127.0.0.1:`port`; False if it
    exits or `timeout` seconds pass first."""
    import grpc  # only the tests that start a daemon need grpcio
    deadline = time.time() + timeout
    # Connect only once the port is open: a refused first attempt puts the channel into
    # reconnect backoff.
    while time.time() < deadline and proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        health = health_pb2_grpc.HealthStub(channel)
        while time.time() < deadline and proc.poll() is None:
            try:
                reply = health.Check(health_pb2.HealthCheckRequest(service="readiness"),
                                     timeout=1)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return True
            except grpc.RpcError:
                pass
            time.sleep(0.1)
    return False


def wait_models_ready(proc, port, names, timeout=120):
    """True once every model in `names` answers ModelReady true on 127.0.0.1:`port`; False if
    the daemon `proc` exits or `timeout` seconds pass first."""
    import grpc
    deadline = time.time() + timeout
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = inference_pb2_grpc.GRPCInferenceServiceStub(channel)
        while time.time() < deadline and proc.poll() is None:
            try:
                if all(stub.ModelReady(inference_pb2.ModelReadyRequest(name=m), timeout=1).ready
                       for m in names):
                    return True
            except grpc.RpcError:
                pass
            time.sleep(0.1)
    return False


def wait_http_ok(proc, url, timeout=120):
    """True once GET `url` answers 200 while the daemon `proc` runs; False if it exits or
    `timeout` seconds pass first."""
    import requests  # only the HTTP tests need it
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        try:
            if requests.get(url, timeout=1).status_code == 200:
                return True
        except requests.RequestException:
            pass
        time.sleep(0.1)
    return False


def scrape_value(metrics_port, series):
    """The value of the unlabelled series `series` on the daemon's /metrics, or None when
    the scrape does not carry it."""
    import re
    import requests
    text = requests.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).text
    match = re.search(rf"^{re.escape(series)} (\S+)$", text, re.M)
    return float(match.group(1)) if match else None


class StartedDaemon:
    """An ndserved that start_daemon started: its process, its loopback ports (http_port is
    None when the HTTP listener is off) and its log. The log goes to a file, not a pipe:
    a daemon that logs more than a pipe holds while nobody reads would block."""

    def __init__(self, proc, ports, log):
        self.proc = proc
        self.grpc_port, self.http_port, self.metrics_port, self.admin_port = ports
        self._log = log

    def log_text(self):
        with open(self._log.name, errors="replace") as f:
            return f.read()

    def stop(self, timeout=60):
        """SIGTERM, wait, remove the log; the exit code and the log's text."""
        self.proc.terminate()
        try:
            code = self.proc.wait(timeout=timeout)
        except Exception:
            self.proc.kill()
            self.proc.wait()
            raise
        text = self.log_text()
        self._log.close()
        os.unlink(self._log.name)
        return code, text


def start_daemon(flags, cwd, http=False, ready=None, tries=5):
    """Starts ndserved ($NDSERVED) on free loopback ports with `flags` added and waits until
    `ready(daemon)` (default: gRPC readiness SERVING) is true. A port taken between the draw
    and the bind ("cannot listen") is retried with fresh ports; any other failure to start
    raises with the daemon's log."""
    import subprocess
    import tempfile
    ready = ready or (lambda d: wait_grpc_ready(d.proc, d.grpc_port))
    for _ in range(tries):
        ports = (free_port(), free_port() if http else None, free_port(), free_port())
        args = [os.environ["NDSERVED"], f"--grpc_address=127.0.0.1:{ports[0]}",
                f"--http_address=127.0.0.1:{ports[1]}" if http else "--http_address=",
                f"--metrics_address=127.0.0.1:{ports[2]}",
                f"--admin_address=127.0.0.1:{ports[3]}", "--device=cpu",
                "--exit_timeout_seconds=5", *flags]
        log = tempfile.NamedTemporaryFile(prefix="ndserved-", suffix=".log", delete=False)
        proc = subprocess.Popen(args, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
        daemon = StartedDaemon(proc, ports, log)
        if ready(daemon):
            return daemon
        proc.kill()
        proc.wait()
        text = daemon.log_text()
        log.close()
        os.unlink(log.name)
        if "cannot listen" not in text:
            raise AssertionError("ndserved did not start:\n" + text)
    raise AssertionError(f"ndserved found no free ports in {tries} tries")
