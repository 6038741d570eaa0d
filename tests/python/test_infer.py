"""ModelInfer from a Python client, as a KServe v2 / Triton user would write it: the
example models (mlp, recsys) against the numpy references in
tests/fixtures/models/<model>/reference, with raw and with typed contents, and the error
a malformed request gets.

Needs NDSERVED (the binary), NDSERVE_PROTO_PYTHON_DIR and NDSERVE_SOURCE_DIR; ctest sets
them. Run with Debian's /usr/bin/python3 (python3-grpcio, python3-protobuf, python3-numpy).
"""

import os
import unittest

import grpc
import numpy as np

from ndserve_grpc import UNLIMITED, inference_pb2, inference_pb2_grpc, start_daemon

SOURCE_DIR = os.environ.get(
    "NDSERVE_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
NUMPY_DTYPE = {"FP32": np.float32, "FP64": np.float64, "INT64": np.int64, "INT32": np.int32,
               "INT16": np.int16, "INT8": np.int8, "UINT8": np.uint8, "UINT16": np.uint16,
               "UINT32": np.uint32, "UINT64": np.uint64, "FP16": np.float16, "BOOL": np.bool_}


def read_case(model):
    """(inputs, outputs, atol, rtol) of a model's reference case.txt; tensors by name."""
    folder = os.path.join(SOURCE_DIR, "tests", "fixtures", "models", model, "reference")
    inputs, outputs, atol, rtol = {}, {}, 1e-5, 1e-4
    with open(os.path.join(folder, "case.txt")) as f:
        for line in f:
            fields = line.split("#", 1)[0].split()
            if not fields:
                continue
            if fields[0] in ("input", "output"):
                name, dtype, dims, path = fields[1:5]
                shape = [int(d) for d in dims.strip("[]").split(",") if d]
                array = np.fromfile(os.path.join(folder, path),
                                    dtype=NUMPY_DTYPE[dtype]).reshape(shape)
                (inputs if fields[0] == "input" else outputs)[name] = (dtype, array)
            elif fields[0] == "tolerance":
                atol, rtol = float(fields[1]), float(fields[2])
    return inputs, outputs, atol, rtol


def infer_request(model, inputs, typed=False):
    request = inference_pb2.ModelInferRequest(model_name=model, id=f"py-{model}")
    for name, (dtype, array) in inputs.items():
        tensor = request.inputs.add(name=name, datatype=dtype, shape=list(array.shape))
        if typed:
            field = {"FP32": "fp32_contents", "INT64": "int64_contents"}[dtype]
            getattr(tensor.contents, field).extend(array.flatten().tolist())
        else:
            request.raw_input_contents.append(np.ascontiguousarray(array).tobytes())
    return request


def outputs_of(response):
    """Output name -> numpy array, from raw_output_contents."""
    return {out.name: np.frombuffer(raw, dtype=NUMPY_DTYPE[out.datatype]).reshape(out.shape)
            for out, raw in zip(response.outputs, response.raw_output_contents)}


class InferTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = start_daemon([], SOURCE_DIR)
        cls.grpc_port = cls.daemon.grpc_port
        cls.channel = grpc.insecure_channel(f"127.0.0.1:{cls.grpc_port}", options=UNLIMITED)
        cls.stub = inference_pb2_grpc.GRPCInferenceServiceStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        code, log = cls.daemon.stop()
        assert code == 0, log

    def check(self, model, typed=False):
        inputs, outputs, atol, rtol = read_case(model)
        response = self.stub.ModelInfer(infer_request(model, inputs, typed), timeout=60)
        self.assertEqual(response.model_name, model)
        self.assertEqual(response.model_version, "1")
        self.assertEqual(response.id, f"py-{model}")
        got = outputs_of(response)
        self.assertEqual(sorted(got), sorted(outputs))
        for name, (dtype, want) in outputs.items():
            self.assertEqual(got[name].dtype, want.dtype)
            self.assertEqual(got[name].shape, want.shape)
            np.testing.assert_allclose(got[name], want, atol=atol, rtol=rtol, err_msg=name)

    def test_mlp(self):
        self.check("mlp")

    def test_recsys(self):
        self.check("recsys")

    def test_typed_contents(self):
        self.check("mlp", typed=True)
        self.check("recsys", typed=True)

    def test_metadata_matches_the_reference_inputs(self):
        inputs, _, _, _ = read_case("recsys")
        md = self.stub.ModelMetadata(inference_pb2.ModelMetadataRequest(name="recsys"))
        self.assertEqual([t.name for t in md.inputs], list(inputs))
        for t in md.inputs:
            self.assertEqual(t.datatype, inputs[t.name][0])
            self.assertEqual(list(t.shape)[1:], list(inputs[t.name][1].shape)[1:])

    def test_wrong_byte_count_names_the_tensor(self):
        inputs, _, _, _ = read_case("mlp")
        request = infer_request("mlp", inputs)
        request.raw_input_contents[0] = request.raw_input_contents[0][:-1]
        with self.assertRaises(grpc.RpcError) as caught:
            self.stub.ModelInfer(request, timeout=60)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("input 'input': expected 768 bytes for shape [3,64] FP32, got 767",
                      caught.exception.details())
        self.check("mlp")

    def test_unknown_model(self):
        inputs, _, _, _ = read_case("mlp")
        with self.assertRaises(grpc.RpcError) as caught:
            self.stub.ModelInfer(infer_request("resnet", inputs), timeout=60)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.NOT_FOUND)
        self.assertIn("resnet", caught.exception.details())


if __name__ == "__main__":
    unittest.main()
