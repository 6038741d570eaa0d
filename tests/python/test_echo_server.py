"""ndserve-echo answers KServe v2 ModelInfer with its inputs, through stock gRPC stubs.

Needs NDSERVE_ECHO (the binary) and NDSERVE_PROTO_PYTHON_DIR; ctest sets both.
"""

import os
import signal
import socket
import struct
import subprocess
import time
import unittest

import grpc

from ndserve_grpc import UNLIMITED, free_port, inference_pb2 as pb, inference_pb2_grpc as pbg


class EchoServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.port = free_port()
        cls.proc = subprocess.Popen(
            [os.environ["NDSERVE_ECHO"], f"--address=127.0.0.1:{cls.port}", "--threads=2"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.time() + 30
        while cls.proc.poll() is None and time.time() < deadline:
            try:  # connect once the port is open, not into gRPC's reconnect backoff
                socket.create_connection(("127.0.0.1", cls.port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        cls.channel = grpc.insecure_channel(f"127.0.0.1:{cls.port}", options=UNLIMITED)
        grpc.channel_ready_future(cls.channel).result(timeout=30)
        cls.stub = pbg.GRPCInferenceServiceStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        if cls.proc.poll() is None:
            cls.proc.kill()
            cls.proc.wait()

    def test_live_and_ready(self):
        self.assertTrue(self.stub.ServerLive(pb.ServerLiveRequest()).live)
        self.assertTrue(self.stub.ServerReady(pb.ServerReadyRequest()).ready)

    def test_raw_inputs_come_back_as_raw_outputs(self):
        request = pb.ModelInferRequest(model_name="echo", model_version="1", id="req-7")
        request.inputs.add(name="x", datatype="FP32", shape=[2, 2])
        request.inputs.add(name="s", datatype="BYTES", shape=[1])
        request.raw_input_contents.append(struct.pack("<4f", 1, 2, 3, 4))
        request.raw_input_contents.append(struct.pack("<I", 5) + b"hello")
        response = self.stub.ModelInfer(request)
        self.assertEqual((response.model_name, response.model_version, response.id),
                         ("echo", "1", "req-7"))
        self.assertEqual([(o.name, o.datatype, list(o.shape)) for o in response.outputs],
                         [("x", "FP32", [2, 2]), ("s", "BYTES", [1])])
        self.assertEqual(list(response.raw_output_contents), list(request.raw_input_contents))

    def test_typed_contents_come_back(self):
        request = pb.ModelInferRequest(model_name="echo")
        tensor = request.inputs.add(name="ids", datatype="INT64", shape=[3])
        tensor.contents.int64_contents.extend([7, -1, 1 << 40])
        response = self.stub.ModelInfer(request)
        self.assertEqual(list(response.outputs[0].contents.int64_contents), [7, -1, 1 << 40])

    def test_large_message(self):
        request = pb.ModelInferRequest(model_name="echo")
        request.inputs.add(name="b", datatype="UINT8", shape=[16 << 20])
        request.raw_input_contents.append(os.urandom(16 << 20))
        response = self.stub.ModelInfer(request)
        self.assertEqual(response.raw_output_contents[0], request.raw_input_contents[0])

    def test_other_rpcs_are_unimplemented(self):
        with self.assertRaises(grpc.RpcError) as caught:
            self.stub.ModelMetadata(pb.ModelMetadataRequest(name="echo"))
        self.assertEqual(caught.exception.code(), grpc.StatusCode.UNIMPLEMENTED)

    def test_zz_sigterm_exits_cleanly(self):
        self.channel.close()
        self.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.proc.wait(timeout=30), 0, self.proc.stdout.read())


if __name__ == "__main__":
    unittest.main()
