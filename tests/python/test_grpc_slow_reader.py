"""A gRPC client that reads a large response slowly, or not at all, over the real daemon:
its response stays in ndserve_host_request_bytes (the --max_inflight_host_bytes budget)
until gRPC has sent it, other clients keep being served meanwhile, and the bytes go back
to 0 when the client has read it all or cancels (docs/design.md §5).

The slow client speaks HTTP/2 itself (Debian's python3-h2) so that it controls its flow
control windows: it announces HTTP/2's default 64 KiB and sends no WINDOW_UPDATE until it
chooses to read, so the daemon can send only the first 64 KiB of a 32 MiB response. A
grpcio client could not be held like that: its transport reads whatever arrives. The model
is made here with python3-onnx: 4 bytes in, 32 MiB out.

Needs NDSERVED, NDSERVE_PROTO_PYTHON_DIR and NDSERVE_SOURCE_DIR (ctest sets them); run
with Debian's /usr/bin/python3.
"""

import os
import shutil
import socket
import struct
import tempfile
import time
import unittest

import grpc
import h2.config
import h2.connection
import h2.events
import onnx
from onnx import TensorProto, helper

from ndserve_grpc import (UNLIMITED, inference_pb2, inference_pb2_grpc, scrape_value,
                          start_daemon, wait_models_ready)

SOURCE_DIR = os.environ.get("NDSERVE_SOURCE_DIR", ".")
ELEMENTS = 8 << 20
RESPONSE_BYTES = ELEMENTS * 4
METHOD = "/inference.GRPCInferenceService/ModelInfer"

# "big": x FP32[1] -> x + zeros(ELEMENTS): 4 bytes in, 32 MiB out (the engine needs
# ConstantOfShape's shape as an initializer). "small": Identity over FP32[-1], for the
# clients served meanwhile.
CONFIGS = {
    "big": """name: "big"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [ { name: "x" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ %d ] } ]
""" % ELEMENTS,
    "small": """name: "small"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [ { name: "x" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ -1 ] } ]
""",
}


def make_repository(root):
    shape = helper.make_tensor("shape", TensorProto.INT64, [1], [ELEMENTS])
    big = helper.make_graph(
        [helper.make_node("ConstantOfShape", ["shape"], ["zeros"]),
         helper.make_node("Add", ["zeros", "x"], ["y"])], "big",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [ELEMENTS])], [shape])
    small = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])], "small",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])])
    for name, graph in (("big", big), ("small", small)):
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
        os.makedirs(os.path.join(root, name, "1"))
        onnx.save(model, os.path.join(root, name, "1", "model.onnx"))
        with open(os.path.join(root, name, "config.pbtxt"), "w") as f:
            f.write(CONFIGS[name])


def infer_request(model, values):
    request = inference_pb2.ModelInferRequest(model_name=model)
    tensor = request.inputs.add()
    tensor.name, tensor.datatype = "x", "FP32"
    tensor.shape.append(len(values))
    request.raw_input_contents.append(struct.pack(f"<{len(values)}f", *values))
    return request


BIG = infer_request("big", [1.0])


class SlowGrpcClient:
    """One ModelInfer call on its own HTTP/2 connection, read only when asked."""

    def __init__(self, port, request):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.stream = self.conn.get_next_available_stream_id()
        self.conn.send_headers(self.stream, [
            (":method", "POST"), (":scheme", "http"), (":path", METHOD),
            (":authority", f"127.0.0.1:{port}"), ("content-type", "application/grpc"),
            ("te", "trailers")])
        body = request.SerializeToString()
        self.conn.send_data(self.stream, b"\0" + struct.pack(">I", len(body)) + body,
                            end_stream=True)
        self.sock.sendall(self.conn.data_to_send())
        self.message = bytearray()
        self.trailers = {}

    def read_all(self):
        """Reads the response to its end, opening the windows as it goes; grpc-status."""
        ended = False
        while not ended:
            data = self.sock.recv(1 << 20)
            if not data:
                raise AssertionError("connection closed before the response ended")
            for event in self.conn.receive_data(data):
                if isinstance(event, h2.events.DataReceived):
                    self.message += event.data
                    self.conn.acknowledge_received_data(event.flow_controlled_length,
                                                        event.stream_id)
                elif isinstance(event, h2.events.TrailersReceived):
                    self.trailers = dict(event.headers)
                elif isinstance(event, h2.events.StreamEnded):
                    ended = True
                elif isinstance(event, h2.events.StreamReset):
                    raise AssertionError(f"stream reset: {event.error_code}")
            self.sock.sendall(self.conn.data_to_send())
        return self.trailers.get("grpc-status")

    def response(self):
        length = struct.unpack(">I", bytes(self.message[1:5]))[0]
        reply = inference_pb2.ModelInferResponse()
        reply.ParseFromString(bytes(self.message[5:5 + length]))
        return reply

    def cancel(self):
        self.conn.reset_stream(self.stream)
        self.sock.sendall(self.conn.data_to_send())

    def close(self):
        self.sock.close()


class GrpcSlowReaderTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.repo = tempfile.mkdtemp(prefix="ndserve-slow-reader-")
        make_repository(cls.repo)
        cls.daemon = start_daemon([f"--model_repository={cls.repo}"], SOURCE_DIR,
                                  ready=lambda d: wait_models_ready(d.proc, d.grpc_port, CONFIGS))
        cls.grpc_port, cls.metrics_port = cls.daemon.grpc_port, cls.daemon.metrics_port
        cls.channel = grpc.insecure_channel(f"127.0.0.1:{cls.grpc_port}", options=UNLIMITED)
        cls.stub = inference_pb2_grpc.GRPCInferenceServiceStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.daemon.stop(timeout=30)
        shutil.rmtree(cls.repo, ignore_errors=True)

    def host_bytes(self):
        value = scrape_value(self.metrics_port, "ndserve_host_request_bytes")
        self.assertIsNotNone(value, "no ndserve_host_request_bytes in /metrics")
        return value

    def await_host_bytes(self, done, what):
        # The limit is a hang guard, not a timing assertion: the bytes move when gRPC
        # reports the send done and deletes the call, a moment after the client has it.
        for _ in range(300):
            if done(self.host_bytes()):
                return
            time.sleep(0.1)
        self.fail(f"{what}: ndserve_host_request_bytes is {self.host_bytes()}\n"
                  + self.daemon.log_text()[-4000:])

    def assert_others_served(self):
        reply = self.stub.ModelInfer(infer_request("small", [1.0, 2.0, 3.0]), timeout=60)
        self.assertEqual(list(reply.outputs[0].shape), [3])
        self.assertEqual(reply.raw_output_contents[0], struct.pack("<3f", 1.0, 2.0, 3.0))

    def test_slow_reader_holds_its_response_until_it_has_read_it(self):
        self.await_host_bytes(lambda b: b == 0, "not idle")
        slow = SlowGrpcClient(self.grpc_port, BIG)
        try:
            # The response is built and waits on the client's 64 KiB window.
            self.await_host_bytes(lambda b: b >= RESPONSE_BYTES, "response never held")
            self.assert_others_served()
            self.assert_others_served()
            self.assertGreaterEqual(self.host_bytes(), RESPONSE_BYTES,
                                    "the unread response left the budget")
            self.assertEqual(slow.read_all(), "0", slow.trailers)
            reply = slow.response()
            self.assertEqual(list(reply.outputs[0].shape), [ELEMENTS])
            self.assertEqual(reply.raw_output_contents[0], struct.pack("<f", 1.0) * ELEMENTS)
        finally:
            slow.close()
        self.await_host_bytes(lambda b: b == 0, "bytes held after the response was read")

    def test_cancelled_slow_reader_gives_its_bytes_back(self):
        self.await_host_bytes(lambda b: b == 0, "not idle")
        slow = SlowGrpcClient(self.grpc_port, BIG)
        try:
            self.await_host_bytes(lambda b: b >= RESPONSE_BYTES, "response never held")
            slow.cancel()
            self.await_host_bytes(lambda b: b == 0, "bytes held after the cancel")
        finally:
            slow.close()
        self.assert_others_served()

    def test_vanished_slow_reader_gives_its_bytes_back(self):
        self.await_host_bytes(lambda b: b == 0, "not idle")
        slow = SlowGrpcClient(self.grpc_port, BIG)
        self.await_host_bytes(lambda b: b >= RESPONSE_BYTES, "response never held")
        slow.close()
        self.await_host_bytes(lambda b: b == 0, "bytes held after the client went away")
        self.assert_others_served()


if __name__ == "__main__":
    unittest.main()
