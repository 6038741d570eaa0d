"""What a Python client (Debian's python3-grpcio, whose protobuf refuses strings that are
not UTF-8) reads back from a daemon whose repository holds a config.pbtxt with bytes that
are not UTF-8, and the error it gets for a 100 KB model name. Before, the first made
RepositoryIndex undecodable for every client, and the second came back as
RESOURCE_EXHAUSTED ("metadata size exceeds limit").

Needs NDSERVED, NDSERVE_PROTO_PYTHON_DIR and NDSERVE_SOURCE_DIR; ctest sets them.
"""

import os
import shutil
import tempfile
import unittest

import grpc

from ndserve_grpc import (UNLIMITED, inference_pb2, inference_pb2_grpc, start_daemon,
                          wait_models_ready)

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
        cls.daemon = start_daemon(
            [f"--model_repository={cls.repo}"], SOURCE_DIR,
            ready=lambda d: wait_models_ready(d.proc, d.grpc_port, ["mlp"]))
        cls.channel = grpc.insecure_channel(f"127.0.0.1:{cls.daemon.grpc_port}", options=UNLIMITED)
        cls.stub = inference_pb2_grpc.GRPCInferenceServiceStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.daemon.stop()
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
