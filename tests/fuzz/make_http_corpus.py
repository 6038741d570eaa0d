"""Writes the seed corpus of http_infer_fuzzer (tests/fuzz/corpus/http_infer): the infer
bodies tests/python/test_http.py sends to the daemon (JSON nested and flat, the binary
tensor extension, binary outputs, every datatype family) and the repository endpoints'
bodies, in the fuzzer's input layout (tests/fuzz/http_infer_fuzzer.cc): a flag byte,
then for binary bodies the 4-byte little-endian header length, then the body.

Run from the repository root with Debian's /usr/bin/python3 (numpy).
"""

import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from kserve_http_body import binary_infer_body, json_infer_body  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "http_infer")


def write(name, body, header_len=None):
    if header_len is None:
        blob = b"\x00" + body
    else:
        blob = b"\x01" + struct.pack("<I", header_len) + body
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(blob)


def json_body(inputs, nested=True, **extra):
    return json.dumps(json_infer_body(inputs, nested, **extra)).encode()


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(1)
    mlp = {"input": ("FP32", rng.standard_normal((2, 64), dtype=np.float32))}
    recsys = {"sparse_ids": ("INT64", rng.integers(0, 100, (2, 4, 8), dtype=np.int64)),
              "dense": ("FP32", rng.standard_normal((2, 13), dtype=np.float32))}
    write("mlp_json_nested", json_body(mlp))
    write("mlp_json_flat", json_body(mlp, nested=False))
    write("mlp_json_binary_out", json_body(
        mlp, outputs=[{"name": "probabilities", "parameters": {"binary_data": True}}]))
    write("mlp_json_default_binary", json_body(mlp, parameters={"binary_data_output": True}))
    write("mlp_binary", *binary_infer_body(mlp))
    write("recsys_json", json_body(recsys))
    write("recsys_binary", *binary_infer_body(recsys))
    write("types_json", json_body({
        "b": ("BOOL", np.array([[True, False]])),
        "u8": ("UINT8", np.array([[0, 255]], dtype=np.uint8)),
        "i8": ("INT8", np.array([[-128, 127]], dtype=np.int8)),
        "u64": ("UINT64", np.array([[0, 2**64 - 1]], dtype=np.uint64)),
        "i32": ("INT32", np.array([[-2**31, 2**31 - 1]], dtype=np.int32)),
        "f64": ("FP64", np.array([[1e300, -0.0]])),
    }))
    bytes_body = {"id": "s", "inputs": [{"name": "text", "datatype": "BYTES", "shape": [2],
                                         "data": ["hello", "w\u00f6rld"]}]}
    write("bytes_json", json.dumps(bytes_body).encode())
    write("fp16_binary", *binary_infer_body({"h": ("FP16", np.array([1.5, -2], dtype=np.float16)),
                                       "bf": ("BF16", np.array([1, 2], dtype=np.uint16))}))
    write("repository_ready", b'{"ready": true}')
    write("repository_unload", b'{"parameters": {"unload_dependents": false}}')
    write("empty", b"")


if __name__ == "__main__":
    main()
