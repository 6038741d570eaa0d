"""Python stubs for ndserve's protos, for tests and scripts.

The modules are generated at build time (proto/CMakeLists.txt, target
ndserve_proto_python): messages by `protoc --python_out`, service stubs by Debian's
grpc_python_plugin (Debian has no grpc_tools). They land in <build>/proto/python; set
NDSERVE_PROTO_PYTHON_DIR to that folder (ctest does) and import from here:

    from ndserve_grpc import inference_pb2, inference_pb2_grpc, admin_pb2, ...

Run with Debian's /usr/bin/python3, which has python3-grpcio and python3-protobuf.
"""

import os
import socket
import sys

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

__all__ = [
    "admin_pb2", "admin_pb2_grpc", "health_pb2", "health_pb2_grpc", "inference_pb2",
    "inference_pb2_grpc", "model_config_pb2", "free_port", "UNLIMITED",
]

# Channel options without gRPC's 4 MiB message cap, as the daemon has none.
UNLIMITED = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]


def free_port():
    """A TCP port that was free a moment ago on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
