"""An HTTP/REST reply keeps its bytes in the host-memory budget until it is written
(docs/design.md §5.1): while a client leaves a large reply unread, the
ndserve_host_request_bytes gauge holds at least the reply's size; other clients are
served meanwhile; when the client reads it all, or hangs up, the gauge returns to 0.

The model is an ONNX Identity over FP32[-1] made here with Debian's python3-onnx, so that
one request has a reply far larger than the loopback socket buffers.

Needs NDSERVED, NDSERVE_PROTO_PYTHON_DIR and NDSERVE_SOURCE_DIR (ctest sets them); run
with Debian's /usr/bin/python3.
"""

import json
import os
import re
import shutil
import socket
import tempfile
import time
import unittest

import onnx
import requests
from onnx import TensorProto, helper

from ndserve_grpc import scrape_value, start_daemon, wait_http_ok

SOURCE_DIR = os.environ.get("NDSERVE_SOURCE_DIR", ".")
HEADER = "Inference-Header-Content-Length"
# 32 MiB of FP32 in, the same out: more than the kernel buffers a reply in on loopback
# (net.ipv4.tcp_wmem's and tcp_rmem's maxima are 4 and 6 MiB by default).
ELEMENTS = 8 << 20
REPLY_BYTES = ELEMENTS * 4

CONFIG = """name: "echo"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [ { name: "x" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""


def make_repository(root):
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])], "echo",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    os.makedirs(os.path.join(root, "echo", "1"))
    onnx.save(model, os.path.join(root, "echo", "1", "model.onnx"))
    with open(os.path.join(root, "echo", "config.pbtxt"), "w") as f:
        f.write(CONFIG)


def echo_request(elements):
    header = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [elements],
                                     "parameters": {"binary_data_size": elements * 4}}],
                         "parameters": {"binary_data_output": True}}).encode()
    body = header + bytes(elements * 4)
    return (b"POST /v2/models/echo/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/octet-stream\r\n"
            + f"{HEADER}: {len(header)}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body)


class HttpHeldReplyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.repo = tempfile.mkdtemp(prefix="ndserve-held-reply-")
        make_repository(cls.repo)
        cls.daemon = start_daemon(
            [f"--model_repository={cls.repo}", "--http_read_timeout_seconds=60"], SOURCE_DIR,
            http=True, ready=lambda d: wait_http_ok(
                d.proc, f"http://127.0.0.1:{d.http_port}/v2/models/echo/ready"))
        cls.http_port, cls.metrics_port = cls.daemon.http_port, cls.daemon.metrics_port
        cls.url = f"http://127.0.0.1:{cls.http_port}"

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop(timeout=30)
        shutil.rmtree(cls.repo, ignore_errors=True)

    def host_bytes(self):
        value = scrape_value(self.metrics_port, "ndserve_host_request_bytes")
        self.assertIsNotNone(value, "no ndserve_host_request_bytes in /metrics")
        return value

    def await_host_bytes_zero(self):
        # The bytes leave the budget when cpp-httplib destroys the reply, just after the
        # last write; the limit is a hang guard, not a timing assertion.
        for _ in range(300):
            if self.host_bytes() == 0:
                return
            time.sleep(0.1)
        self.assertEqual(self.host_bytes(), 0, "host bytes still held")

    def start_unread_reply(self):
        """A connection whose echo reply the daemon has started to send and nobody reads."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
        sock.connect(("127.0.0.1", self.http_port))
        sock.sendall(echo_request(ELEMENTS))
        # Blocks until the reply's first bytes arrive: the handler has returned and the
        # daemon is writing.
        sock.settimeout(120)
        head = sock.recv(12, socket.MSG_PEEK)
        self.assertEqual(head, b"HTTP/1.1 200")
        return sock

    def test_unread_reply_holds_its_bytes_until_read(self):
        self.await_host_bytes_zero()
        sock = self.start_unread_reply()
        try:
            self.assertGreaterEqual(self.host_bytes(), REPLY_BYTES,
                                    "the unread reply's bytes left the budget before it was sent")
            # Another client is served meanwhile.
            small = requests.post(f"{self.url}/v2/models/echo/infer", timeout=60, json={
                "inputs": [{"name": "x", "datatype": "FP32", "shape": [3],
                            "data": [1.0, 2.0, 3.0]}]})
            self.assertEqual(small.status_code, 200, small.text)
            self.assertEqual(small.json()["outputs"][0]["data"], [1.0, 2.0, 3.0])
            self.assertGreaterEqual(self.host_bytes(), REPLY_BYTES)
            # Read the whole reply: head, JSON header, then the echoed bytes.
            sock.settimeout(60)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = sock.recv(1 << 16)
                self.assertTrue(chunk, "connection closed in the reply's head")
                data += chunk
            head, first = data.split(b"\r\n\r\n", 1)
            length = int(re.search(rb"Content-Length: (\d+)", head, re.I).group(1))
            body = bytearray(length)
            body[:len(first)] = first
            view, got = memoryview(body), len(first)
            while got < length:
                n = sock.recv_into(view[got:])
                self.assertGreater(n, 0, "connection closed in the reply's body")
                got += n
            json_bytes = int(re.search(rb"Inference-Header-Content-Length: (\d+)", head,
                                       re.I).group(1))
            self.assertEqual(len(body) - json_bytes, REPLY_BYTES)
        finally:
            sock.close()
        self.await_host_bytes_zero()

    def test_reply_bytes_return_when_the_client_hangs_up(self):
        self.await_host_bytes_zero()
        sock = self.start_unread_reply()
        self.assertGreaterEqual(self.host_bytes(), REPLY_BYTES)
        sock.close()
        self.await_host_bytes_zero()
        self.assertEqual(requests.get(f"{self.url}/v2/health/ready", timeout=10).status_code,
                         200)


if __name__ == "__main__":
    unittest.main()
