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
    "UNLIMITED",
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
