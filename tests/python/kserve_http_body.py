"""Bodies of KServe v2 HTTP infer requests, shared by the HTTP tests and the HTTP fuzzer's
corpus script (tests/fuzz/make_http_corpus.py), so the fuzzer starts from exactly what the
tests send. Needs numpy only.

`inputs` maps an input name to (KServe datatype, numpy array).
"""

import json

import numpy as np


def json_infer_body(inputs, nested=True, **extra):
    """The JSON body as a dict: tensor data nested by shape, or flat."""
    body = {"id": "http-1", "inputs": []}
    for name, (dtype, array) in inputs.items():
        data = array.tolist() if nested else array.flatten().tolist()
        body["inputs"].append({"name": name, "datatype": dtype, "shape": list(array.shape),
                               "data": data})
    body.update(extra)
    return body


def binary_infer_body(inputs, **extra):
    """(body bytes, JSON header length) with the binary tensor extension: every input's
    bytes after the JSON header, binary outputs asked for."""
    header = {"inputs": [], "parameters": {"binary_data_output": True}}
    blobs = []
    for name, (dtype, array) in inputs.items():
        blob = np.ascontiguousarray(array).tobytes()
        header["inputs"].append({"name": name, "datatype": dtype, "shape": list(array.shape),
                                 "parameters": {"binary_data_size": len(blob)}})
        blobs.append(blob)
    header.update(extra)
    head = json.dumps(header).encode()
    return head + b"".join(blobs), len(head)
