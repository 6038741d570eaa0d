"""What a Python client (Debian's python3-grpcio, whose protobuf refuses strings that are
not UTF-8) reads back from a daemon whose repository holds a config.pbtxt with bytes that
are not UTF-8, and the error it gets for a 100 KB model name. Before, the first made
RepositoryIndex undecodable for every client, and the second came back as
RESOURCE_EXHAUSTED ("metadata size exceeds limit").

Needs NDSERVED, NDSERVE_PROTO_PYTHON_DIR and NDSERVE_SOURCE_DIR; ctest sets them.
"""

import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

import grpc

from ndserve_grpc import UNLIMITED, free_port, inference_pb2, inference_pb2_grpc

SOURCE_DIR = os.environ.get(
    "NDSERVE_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))


class RepositoryTextTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.repo = tempfile.mkdtemp(prefix="ndserve_text_")
        mlp = os.path.join(SOURCE_DIR, "examples", "models", "mlp", "1", "model.onnx")
        for name in ("mlp", "binary"):
            os.makedirs(os.path.join(cls.repo, name, "1"))
            shutil.copy(mlp, os.path.join(cls.repo, name, "1", "model.onnx"))
        with open(os.path.join(cls.repo, "binary", "config.pbtxt"), "wb") as f:
            f.write(b'name: "binary"\nplatform: "onnx\xff\xfe"\n')
        cls.port = free_port()
        cls.proc = subprocess.Popen(
            [os.environ["NDSERVED"], f"--grpc_address=127.0.0.1:{cls.port}",
             "--http_address=",
             f"--metrics_address=127.0.0.1:{free_port()}",
             f"--admin_address=127.0.0.1:{free_port()}", "--device=cpu",
             f"--model_repository={cls.repo}", "--exit_timeout_seconds=5"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        cls.channel = grpc.insecure_channel(f"127.0.0.1:{cls.port}", options=UNLIMITED)
        cls.stub = inference_pb2_grpc.GRPCInferenceServiceStub(cls.channel)
        deadline = time.time() + 120
        while time.time() < deadline and cls.proc.poll() is None:
            try:
                if cls.stub.ServerLive(inference_pb2.ServerLiveRequest(), timeout=1).live:
                    ready = cls.stub.ModelReady(inference_pb2.ModelReadyRequest(name="mlp"),
                                                timeout=1)
                    if ready.ready:
                        return
            except grpc.RpcError:
                pass
            time.sleep(0.1)
        raise AssertionError("ndserved did not start:\n" + cls.proc.stdout.read().decode(
            "utf-8", "replace"))

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.proc.send_signal(signal.SIGTERM)
        cls.proc.wait(timeout=60)
        shutil.rmtree(cls.repo, ignore_errors=True)

    def test_repository_index_decodes(self):
        index = self.stub.RepositoryIndex(inference_pb2.RepositoryIndexRequest(), timeout=30)
        rows = {m.name: m for m in index.models}
        self.assertEqual(rows["binary"].state, "UNAVAILABLE")
        self.assertIn("binary/config.pbtxt: platform 'onnx\ufffd\ufffd' is not supported",
                      rows["binary"].reason)
        self.assertEqual(rows["mlp"].state, "READY")

    def test_long_model_name_is_invalid_argument(self):
        with self.assertRaises(grpc.RpcError) as caught:
            self.stub.ModelReady(inference_pb2.ModelReadyRequest(name="m" * 100_000), timeout=30)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("100000 bytes long", caught.exception.details())
        self.assertLess(len(caught.exception.details()), 300)


if __name__ == "__main__":
    unittest.main()
