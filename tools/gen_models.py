#!/usr/bin/python3
"""Generates ndserve's example models and test fixtures, reproducibly.

Run with Debian's python (it has python3-onnx and python3-numpy):

    /usr/bin/python3 tools/gen_models.py [--out ROOT] [--only examples|fixtures]

Every random tensor comes from a generator seeded by a fixed number, and every file is
serialized deterministically, so running this again writes byte-identical files. Files
whose bytes did not change are not rewritten, only touched, so a build rule that lists
them as outputs of this script sees them up to date.

Writes, under ROOT (default: the repository root):

  examples/models/mlp/{config.pbtxt,1/model.onnx}
  examples/models/recsys/{config.pbtxt,1/model.onnx}
  tests/fixtures/models/<mlp|recsys|transformer>/reference/{case.txt,*.bin}
  tests/fixtures/models/transformer/{config.pbtxt,1/model.onnx}
  tests/fixtures/ops/<case>/{model.onnx,case.txt,*.bin}
  tests/fixtures/bad/*.onnx
  tests/fixtures/graphs/<name>/{model.onnx,<case>/{case.txt,*.bin}}

case.txt is a line-oriented manifest (see FORMAT below); tensors are raw little-endian,
C-ordered .bin files so C++ tests can read them without an npz parser.
"""

FORMAT = """\
# ndserve fixture manifest v1. One directive per line; '#' starts a comment.
#   model <path>                                ONNX file, relative to this file
#   op <OpType>                                 (op cases) the node's op_type
#   opset <N>                                   (op cases) default-domain opset of model
#   attr <name> int|float|ints|floats|string <v> (op cases) node attribute as in ONNX;
#                                               lists are comma-separated, no spaces
#                                               (Cast's 'to' is the TensorProto enum)
#   attr <name> string <v>                      (op cases) STRING attribute (no spaces)
#   attr <name> tensor <DTYPE> <dims> <v>       (op cases) TENSOR attribute, values
#                                               comma-separated (ConstantOfShape value)
#   input <name> <DTYPE> <dims> <file>          graph input, fed at run time
#   const <name> <DTYPE> <dims> <file>          node input stored as an initializer
#   output <name> <DTYPE> <dims> <file>         reference output (numpy)
#   tolerance <atol> <rtol>                     pass if |got-ref| <= atol + rtol*|ref|
# input/const lines appear in the node's input order; output lines in its output order.
# dims are '[d0,d1,...]' ('[]' is a scalar); DTYPE is FP32, FP16, FP64, INT8, INT16,
# INT32, INT64, UINT8, UINT16, UINT32, UINT64 or BOOL (1 byte, 0 or 1).
"""

import argparse
import math
import importlib
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

PRODUCER = "ndserve-gen_models"

NP_TO_NAME = {
    np.dtype(np.float32): "FP32",
    np.dtype(np.float16): "FP16",
    np.dtype(np.float64): "FP64",
    np.dtype(np.int8): "INT8",
    np.dtype(np.int16): "INT16",
    np.dtype(np.int32): "INT32",
    np.dtype(np.int64): "INT64",
    np.dtype(np.uint8): "UINT8",
    np.dtype(np.uint16): "UINT16",
    np.dtype(np.uint32): "UINT32",
    np.dtype(np.uint64): "UINT64",
    np.dtype(np.bool_): "BOOL",
}
NP_TO_ONNX = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float16): TensorProto.FLOAT16,
    np.dtype(np.float64): TensorProto.DOUBLE,
    np.dtype(np.int8): TensorProto.INT8,
    np.dtype(np.int16): TensorProto.INT16,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.uint8): TensorProto.UINT8,
    np.dtype(np.uint16): TensorProto.UINT16,
    np.dtype(np.uint32): TensorProto.UINT32,
    np.dtype(np.uint64): TensorProto.UINT64,
    np.dtype(np.bool_): TensorProto.BOOL,
}


# ---------------------------------------------------------------------------------------
# Writing


class Writer:
    """Writes files under a root, only when their bytes change; counts what it did."""

    def __init__(self, root):
        self.root = root
        self.written = 0
        self.unchanged = 0

    def write(self, rel, data):
        if isinstance(data, str):
            data = data.encode("utf-8")
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if os.path.exists(path):
            with open(path, "rb") as f:
                if f.read() == data:
                    os.utime(path)
                    self.unchanged += 1
                    return
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        self.written += 1

    def write_model(self, rel, model):
        self.write(rel, model.SerializeToString(deterministic=True))


def tensor_bytes(a):
    a = np.array(a, copy=True, order="C")
    if a.dtype == np.bool_:
        return a.astype(np.uint8).tobytes()
    return a.astype(a.dtype.newbyteorder("<")).tobytes()


def dims_text(shape):
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def safe_name(name):
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in name)


def write_case(w, case_dir, header_lines, inputs, outputs, tolerance):
    """inputs: [(kind 'input'|'const', name, array)]; outputs: [(name, array)]."""
    lines = [FORMAT.rstrip("\n")] + header_lines
    for kind, name, arr in inputs:
        fname = "in_" + safe_name(name) + ".bin"
        w.write(os.path.join(case_dir, fname), tensor_bytes(arr))
        lines.append(f"{kind} {name} {NP_TO_NAME[arr.dtype]} {dims_text(arr.shape)} {fname}")
    for name, arr in outputs:
        fname = "out_" + safe_name(name) + ".bin"
        w.write(os.path.join(case_dir, fname), tensor_bytes(arr))
        lines.append(f"output {name} {NP_TO_NAME[arr.dtype]} {dims_text(arr.shape)} {fname}")
    lines.append(f"tolerance {tolerance[0]:g} {tolerance[1]:g}")
    w.write(os.path.join(case_dir, "case.txt"), "\n".join(lines) + "\n")


def make_model(graph, opset, domains=()):
    imports = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    model = helper.make_model(graph, opset_imports=imports, producer_name=PRODUCER,
                              producer_version="1")
    # IR 8 is what onnx 1.12 (Debian 12) writes for opsets up to 17.
    model.ir_version = 8
    return model


def value_info(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def init(name, arr):
    # np.ascontiguousarray would turn a scalar into shape [1]; copy() keeps rank 0.
    return numpy_helper.from_array(np.array(arr, copy=True, order="C"), name)


def config_pbtxt(name, max_batch, inputs, outputs):
    """inputs/outputs: [(name, 'TYPE_FP32', dims-without-batch)]."""

    def block(entries):
        parts = []
        for n, t, dims in entries:
            d = ", ".join(str(x) for x in dims)
            parts.append(f"  {{\n    name: \"{n}\"\n    data_type: {t}\n    dims: [ {d} ]\n  }}")
        return ",\n".join(parts)

    return (f"name: \"{name}\"\n"
            f"platform: \"onnxruntime_onnx\"\n"
            f"max_batch_size: {max_batch}\n"
            f"input [\n{block(inputs)}\n]\n"
            f"output [\n{block(outputs)}\n]\n"
            f"instance_group [\n  {{\n    count: 1\n    kind: KIND_AUTO\n  }}\n]\n"
            f"dynamic_batching {{ }}\n")


# ---------------------------------------------------------------------------------------
# numpy references (float64 inside where it matters, float32 out)


def erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64))


def softmax(x, axis):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(np.float32)


def layernorm(x, scale, bias, axis, eps):
    axis = axis % x.ndim
    axes = tuple(range(axis, x.ndim))
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=axes, keepdims=True)
    inv = 1.0 / np.sqrt(var + eps)
    y = (x64 - mean) * inv * scale.astype(np.float64)
    if bias is not None:
        y = y + bias.astype(np.float64)
    return y.astype(np.float32), mean.astype(np.float32), inv.astype(np.float32)


def gemm(a, b, c, alpha, beta, trans_a, trans_b):
    a64 = a.astype(np.float64).T if trans_a else a.astype(np.float64)
    b64 = b.astype(np.float64).T if trans_b else b.astype(np.float64)
    y = alpha * (a64 @ b64)
    if c is not None:
        y = y + beta * c.astype(np.float64)
    return y.astype(np.float32)


def matmul(a, b):
    return np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)


def reshape_ref(x, shape):
    out = []
    for i, d in enumerate(shape):
        out.append(x.shape[i] if d == 0 else d)
    return x.reshape(out)


def gelu(h):
    return (h.astype(np.float64) * 0.5 * (1.0 + erf(h / math.sqrt(2.0)))).astype(np.float32)


def relu(x):
    return np.maximum(x, 0).astype(x.dtype)


def sigmoid(x):
    return (1.0 / (1.0 + np.exp(-x.astype(np.float64)))).astype(np.float32)


# ---------------------------------------------------------------------------------------
# Per-op fixtures


def float_data(rng, shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


EXACT = (0.0, 0.0)
ELEMENTWISE_MATH = (1e-6, 1e-5)
GEMM_TOL = (1e-5, 1e-4)
NORM_TOL = (1e-5, 1e-4)
REDUCE_TOL = (1e-5, 1e-5)


class OpCase:

    def __init__(self, name, op, opset, inputs, outputs, attrs=None, tol=EXACT):
        self.name = name
        self.op = op
        self.opset = opset
        self.inputs = inputs  # [(kind, name, array)]
        self.outputs = outputs  # [(name, array)]
        self.attrs = attrs or {}  # name -> (kind, value)
        self.tol = tol


def op_cases():
    cases = []
    seed = [1000]

    def rng():
        seed[0] += 1
        return np.random.default_rng(seed[0])

    def add(*args, **kwargs):
        cases.append(OpCase(*args, **kwargs))

    # Gemm --------------------------------------------------------------------------------
    r = rng()
    a, b = float_data(r, (3, 4)), float_data(r, (4, 5))
    add("gemm_basic", "Gemm", 13, [("input", "A", a), ("input", "B", b)],
        [("Y", gemm(a, b, None, 1.0, 1.0, False, False))], tol=GEMM_TOL)
    r = rng()
    a, b, c = float_data(r, (4, 3)), float_data(r, (5, 4)), float_data(r, (5,))
    add("gemm_trans_alpha_beta_c_row", "Gemm", 13,
        [("input", "A", a), ("input", "B", b), ("input", "C", c)],
        [("Y", gemm(a, b, c, 0.5, 2.0, True, True))],
        attrs={"alpha": ("float", 0.5), "beta": ("float", 2.0), "transA": ("int", 1),
               "transB": ("int", 1)}, tol=GEMM_TOL)
    r = rng()
    a, b, c = float_data(r, (3, 4)), float_data(r, (4, 5)), float_data(r, (3, 1))
    add("gemm_c_column", "Gemm", 15, [("input", "A", a), ("input", "B", b), ("input", "C", c)],
        [("Y", gemm(a, b, c, 1.0, 1.0, False, False))], tol=GEMM_TOL)
    r = rng()
    a, b, c = float_data(r, (3, 4)), float_data(r, (5, 4)), float_data(r, (1,))
    add("gemm_c_scalar_transb", "Gemm", 13,
        [("input", "A", a), ("input", "B", b), ("const", "C", c)],
        [("Y", gemm(a, b, c, 1.0, 0.25, False, True))],
        attrs={"beta": ("float", 0.25), "transB": ("int", 1)}, tol=GEMM_TOL)
    r = rng()
    a, b, c = float_data(r, (6, 17)), float_data(r, (17, 9)), float_data(r, (6, 9))
    add("gemm_c_full", "Gemm", 17, [("input", "A", a), ("input", "B", b), ("input", "C", c)],
        [("Y", gemm(a, b, c, 1.0, 1.0, False, False))], tol=GEMM_TOL)

    # MatMul ------------------------------------------------------------------------------
    for name, sa, sb in [
        ("matmul_2d", (3, 4), (4, 5)),
        ("matmul_batched", (2, 3, 4), (2, 4, 5)),
        ("matmul_broadcast_batch", (2, 1, 3, 4), (3, 4, 5)),
        ("matmul_rhs_2d", (2, 3, 4), (4, 5)),
        ("matmul_lhs_2d", (3, 4), (2, 4, 5)),
        ("matmul_1d_lhs", (4,), (2, 4, 5)),
        ("matmul_1d_rhs", (2, 3, 4), (4,)),
        ("matmul_1d_1d", (7,), (7,)),
    ]:
        r = rng()
        a, b = float_data(r, sa), float_data(r, sb)
        add(name, "MatMul", 13, [("input", "A", a), ("input", "B", b)], [("Y", matmul(a, b))],
            tol=GEMM_TOL)

    # Binary elementwise ------------------------------------------------------------------
    binary = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}
    shapes = [("same", (2, 3), (2, 3)), ("bcast_row", (2, 3, 4), (4,)),
              ("bcast_both", (2, 1, 4), (3, 1)), ("scalar", (2, 3), ())]
    for op, fn in binary.items():
        for tag, sa, sb in shapes:
            r = rng()
            a, b = float_data(r, sa), float_data(r, sb)
            add(f"{op.lower()}_{tag}", op, 13, [("input", "A", a), ("input", "B", b)],
                [("C", fn(a, b).astype(np.float32))])
    for tag, sa, sb in shapes + [("bcast_col", (2, 3), (2, 1))]:
        r = rng()
        a = float_data(r, sa)
        b = (r.uniform(0.5, 2.0, size=sb) * r.choice([-1.0, 1.0], size=sb)).astype(np.float32)
        add(f"div_{tag}", "Div", 14, [("input", "A", a), ("input", "B", b)],
            [("C", (a / b).astype(np.float32))])
    r = rng()
    a = r.integers(-1000, 1000, size=(2, 3)).astype(np.int64)
    b = r.integers(-1000, 1000, size=(3,)).astype(np.int64)
    add("add_int64_bcast", "Add", 14, [("input", "A", a), ("input", "B", b)], [("C", a + b)])
    a = r.integers(-100, 100, size=(2, 3)).astype(np.int32)
    b = r.integers(-100, 100, size=(2, 1)).astype(np.int32)
    add("mul_int32_bcast", "Mul", 14, [("input", "A", a), ("input", "B", b)], [("C", a * b)])
    a = np.array([[7, -7, 9, 0], [100, -100, 5, -5]], dtype=np.int64)
    b = np.array([2, 2, -4, 3], dtype=np.int64)
    # Integer Div truncates toward zero, as C++ (and onnxruntime) does.
    add("div_int64_trunc", "Div", 14, [("input", "A", a), ("input", "B", b)],
        [("C", np.trunc(a / b).astype(np.int64))])
    r = rng()
    a, b = float_data(r, (0, 3)), float_data(r, (3,))
    add("add_empty", "Add", 13, [("input", "A", a), ("input", "B", b)], [("C", a + b)])

    # Unary elementwise -------------------------------------------------------------------
    r = rng()
    x = float_data(r, (2, 3, 4), -5.0, 5.0)
    x.flat[0], x.flat[1], x.flat[2] = 0.0, -30.0, 30.0
    add("relu", "Relu", 14, [("input", "X", x)], [("Y", relu(x))])
    add("sigmoid", "Sigmoid", 13, [("input", "X", x)], [("Y", sigmoid(x))], tol=ELEMENTWISE_MATH)
    add("tanh", "Tanh", 13, [("input", "X", x)], [("Y", np.tanh(x.astype(np.float64))
                                                        .astype(np.float32))],
        tol=ELEMENTWISE_MATH)
    add("erf", "Erf", 13, [("input", "X", x)], [("Y", erf(x).astype(np.float32))],
        tol=ELEMENTWISE_MATH)

    # Softmax -----------------------------------------------------------------------------
    r = rng()
    x = float_data(r, (2, 3, 5), -4.0, 4.0)
    add("softmax_last_axis", "Softmax", 13, [("input", "X", x)], [("Y", softmax(x, -1))],
        tol=ELEMENTWISE_MATH)
    add("softmax_axis1", "Softmax", 13, [("input", "X", x)], [("Y", softmax(x, 1))],
        attrs={"axis": ("int", 1)}, tol=ELEMENTWISE_MATH)
    x = np.array([[1000.0, 999.0, -1000.0, 0.0], [-50.0, -50.0, -50.0, -50.0]], np.float32)
    add("softmax_large_values", "Softmax", 13, [("input", "X", x)], [("Y", softmax(x, -1))],
        tol=ELEMENTWISE_MATH)
    r = rng()
    x = float_data(r, (3, 300), -4.0, 4.0)
    add("softmax_wide_row", "Softmax", 13, [("input", "X", x)], [("Y", softmax(x, -1))],
        tol=ELEMENTWISE_MATH)

    # LayerNormalization (opset 17 is the first to define it) ----------------------------
    r = rng()
    x, s, bb = float_data(r, (2, 3, 8)), float_data(r, (8,)), float_data(r, (8,))
    y, mean, inv = layernorm(x, s, bb, -1, 1e-5)
    add("layernorm_last_axis", "LayerNormalization", 17,
        [("input", "X", x), ("const", "Scale", s), ("const", "B", bb)], [("Y", y)],
        tol=NORM_TOL)
    r = rng()
    x, s, bb = float_data(r, (2, 3, 4)), float_data(r, (3, 4)), float_data(r, (3, 4))
    y, mean, inv = layernorm(x, s, bb, 1, 1e-3)
    add("layernorm_axis1_stats", "LayerNormalization", 17,
        [("input", "X", x), ("input", "Scale", s), ("input", "B", bb)],
        [("Y", y), ("Mean", mean), ("InvStdDev", inv)],
        attrs={"axis": ("int", 1), "epsilon": ("float", 1e-3)}, tol=NORM_TOL)
    r = rng()
    x, s = float_data(r, (4, 384), -3.0, 3.0), float_data(r, (384,))
    y, _, _ = layernorm(x, s, None, -1, 1e-5)
    add("layernorm_no_bias_wide", "LayerNormalization", 17,
        [("input", "X", x), ("input", "Scale", s)], [("Y", y)], tol=NORM_TOL)

    # Gather ------------------------------------------------------------------------------
    r = rng()
    data = float_data(r, (10, 4))
    idx = np.array([[0, 9, -1], [3, -10, 5]], dtype=np.int64)
    add("gather_axis0", "Gather", 13, [("input", "data", data), ("input", "indices", idx)],
        [("output", np.take(data, idx, axis=0))])
    r = rng()
    data = float_data(r, (3, 5, 2))
    idx = np.array([4, 0, -2, 1], dtype=np.int32)
    add("gather_axis1_int32", "Gather", 13, [("input", "data", data), ("input", "indices", idx)],
        [("output", np.take(data, idx, axis=1))], attrs={"axis": ("int", 1)})
    r = rng()
    data = float_data(r, (3, 4))
    idx = np.array(2, dtype=np.int64)
    add("gather_scalar_index", "Gather", 13, [("input", "data", data), ("const", "indices", idx)],
        [("output", np.take(data, idx, axis=0))])
    r = rng()
    data = r.integers(0, 1 << 40, size=(2, 4, 3)).astype(np.int64)
    idx = np.array(1, dtype=np.int64)
    add("gather_int64_data_axis1", "Gather", 13,
        [("input", "data", data), ("const", "indices", idx)],
        [("output", np.take(data, idx, axis=1))], attrs={"axis": ("int", 1)})

    # ReduceSum (axes is an input from opset 13) ------------------------------------------
    r = rng()
    x = float_data(r, (2, 3, 4))
    add("reducesum_axis1_keepdims", "ReduceSum", 13,
        [("input", "data", x), ("const", "axes", np.array([1], np.int64))],
        [("reduced", x.sum(axis=1, keepdims=True, dtype=np.float64).astype(np.float32))],
        tol=REDUCE_TOL)
    add("reducesum_axes02_nokeep", "ReduceSum", 13,
        [("input", "data", x), ("const", "axes", np.array([0, 2], np.int64))],
        [("reduced", x.sum(axis=(0, 2), dtype=np.float64).astype(np.float32))],
        attrs={"keepdims": ("int", 0)}, tol=REDUCE_TOL)
    add("reducesum_all_default_axes", "ReduceSum", 13, [("input", "data", x)],
        [("reduced", x.sum(axis=(0, 1, 2), keepdims=True, dtype=np.float64)
          .astype(np.float32))], tol=REDUCE_TOL)
    add("reducesum_negative_axis", "ReduceSum", 13,
        [("input", "data", x), ("const", "axes", np.array([-1], np.int64))],
        [("reduced", x.sum(axis=-1, dtype=np.float64).astype(np.float32))],
        attrs={"keepdims": ("int", 0)}, tol=REDUCE_TOL)
    add("reducesum_noop_empty_axes", "ReduceSum", 13, [("input", "data", x)],
        [("reduced", x.copy())], attrs={"noop_with_empty_axes": ("int", 1)}, tol=REDUCE_TOL)

    # ReduceMean (axes is an attribute until opset 18) ------------------------------------
    r = rng()
    x = float_data(r, (2, 3, 4))
    add("reducemean_axis1_keepdims", "ReduceMean", 13, [("input", "data", x)],
        [("reduced", x.mean(axis=1, keepdims=True, dtype=np.float64).astype(np.float32))],
        attrs={"axes": ("ints", [1])}, tol=REDUCE_TOL)
    add("reducemean_axes02_nokeep", "ReduceMean", 17, [("input", "data", x)],
        [("reduced", x.mean(axis=(0, 2), dtype=np.float64).astype(np.float32))],
        attrs={"axes": ("ints", [0, -1]), "keepdims": ("int", 0)}, tol=REDUCE_TOL)
    add("reducemean_all_nokeep", "ReduceMean", 13, [("input", "data", x)],
        [("reduced", np.array(x.mean(dtype=np.float64), dtype=np.float32))],
        attrs={"keepdims": ("int", 0)}, tol=REDUCE_TOL)

    # Concat ------------------------------------------------------------------------------
    r = rng()
    a, b, c = float_data(r, (2, 3)), float_data(r, (4, 3)), float_data(r, (1, 3))
    add("concat_axis0", "Concat", 13,
        [("input", "a", a), ("input", "b", b), ("input", "c", c)],
        [("concat_result", np.concatenate([a, b, c], axis=0))], attrs={"axis": ("int", 0)})
    r = rng()
    a, b, c = float_data(r, (2, 1, 4)), float_data(r, (2, 3, 4)), float_data(r, (2, 2, 4))
    add("concat_axis1", "Concat", 13,
        [("input", "a", a), ("input", "b", b), ("input", "c", c)],
        [("concat_result", np.concatenate([a, b, c], axis=1))], attrs={"axis": ("int", 1)})
    r = rng()
    a = r.integers(-9, 9, size=(2, 2)).astype(np.int64)
    b = r.integers(-9, 9, size=(2, 5)).astype(np.int64)
    add("concat_negative_axis_int64", "Concat", 13, [("input", "a", a), ("input", "b", b)],
        [("concat_result", np.concatenate([a, b], axis=-1))], attrs={"axis": ("int", -1)})

    # Reshape / Flatten / Transpose / Unsqueeze / Squeeze / Identity ----------------------
    r = rng()
    x = float_data(r, (2, 3, 4))
    for tag, shape in [("minus_one", [4, -1]), ("zero_and_minus_one", [0, -1, 2])]:
        shape_arr = np.array(shape, dtype=np.int64)
        add(f"reshape_{tag}", "Reshape", 14, [("input", "data", x), ("const", "shape", shape_arr)],
            [("reshaped", reshape_ref(x, shape))])
    for tag, axis in [("axis1", 1), ("axis0", 0), ("axis_negative", -1)]:
        ax = axis % x.ndim if axis < 0 else axis
        outer = int(np.prod(x.shape[:ax])) if ax > 0 else 1
        add(f"flatten_{tag}", "Flatten", 13, [("input", "input", x)],
            [("output", x.reshape(outer, -1))], attrs={"axis": ("int", axis)})
    add("transpose_perm120", "Transpose", 13, [("input", "data", x)],
        [("transposed", np.transpose(x, (1, 2, 0)))], attrs={"perm": ("ints", [1, 2, 0])})
    add("transpose_default_reverse", "Transpose", 13, [("input", "data", x)],
        [("transposed", np.transpose(x))])
    r = rng()
    x4 = float_data(r, (2, 3, 4, 5))
    add("transpose_4d_0213", "Transpose", 13, [("input", "data", x4)],
        [("transposed", np.transpose(x4, (0, 2, 1, 3)))],
        attrs={"perm": ("ints", [0, 2, 1, 3])})
    r = rng()
    x = float_data(r, (3, 4))
    add("unsqueeze_axes_0_3", "Unsqueeze", 13,
        [("input", "data", x), ("const", "axes", np.array([0, 3], np.int64))],
        [("expanded", x.reshape(1, 3, 4, 1))])
    add("unsqueeze_negative_axis", "Unsqueeze", 13,
        [("input", "data", x), ("const", "axes", np.array([-1], np.int64))],
        [("expanded", x.reshape(3, 4, 1))])
    r = rng()
    x = float_data(r, (1, 3, 1, 4))
    add("squeeze_axes_0_2", "Squeeze", 13,
        [("input", "data", x), ("const", "axes", np.array([0, 2], np.int64))],
        [("squeezed", x.reshape(3, 4))])
    add("squeeze_all_ones", "Squeeze", 13, [("input", "data", x)],
        [("squeezed", x.reshape(3, 4))])
    add("squeeze_negative_axis", "Squeeze", 13,
        [("input", "data", x), ("const", "axes", np.array([-2], np.int64))],
        [("squeezed", x.reshape(1, 3, 4))])
    add("identity", "Identity", 16, [("input", "input", x)], [("output", x.copy())])

    # Cast --------------------------------------------------------------------------------
    r = rng()
    i64 = r.integers(-(1 << 20), 1 << 20, size=(2, 3)).astype(np.int64)
    f32 = float_data(r, (2, 4), -1000.0, 1000.0)
    f32.flat[0], f32.flat[1], f32.flat[2] = 0.5, -0.5, -0.0
    i32 = r.integers(-(1 << 30), 1 << 30, size=(5,)).astype(np.int32)
    bl = np.array([True, False, True], dtype=np.bool_)
    u8 = np.array([0, 1, 127, 255], dtype=np.uint8)
    f16src = np.array([0.0, 1.0, -2.5, 65504.0, 1e-5, 3.14159, 1e-8, -70000.0], np.float32)
    for name, src, to in [
        ("cast_int64_to_fp32", i64, np.float32),
        ("cast_fp32_to_int32", f32, np.int32),
        ("cast_fp32_to_int64", f32, np.int64),
        ("cast_int32_to_int64", i32, np.int64),
        ("cast_bool_to_fp32", bl, np.float32),
        ("cast_fp32_to_bool", np.array([0.0, -0.0, 1.5, -2.0, 1e-30], np.float32), np.bool_),
        ("cast_uint8_to_fp32", u8, np.float32),
        ("cast_fp32_to_fp16", f16src, np.float16),
        ("cast_fp16_to_fp32", f16src.astype(np.float16), np.float32),
        ("cast_fp32_to_fp64", f32, np.float64),
    ]:
        add(name, "Cast", 13, [("input", "input", src)], [("output", src.astype(to))],
            attrs={"to": ("dtype", np.dtype(to))})
    # Operator families added after the first slice live in tools/op_cases/<family>.py,
    # one module per family, each with cases(add, rng) that adds OpCases through `add`.
    for family in OP_CASE_FAMILIES:
        importlib.import_module(f"op_cases.{family}").cases(add, rng)
    return cases


OP_CASE_FAMILIES = ("math", "data", "conv", "rnn", "shape_of", "detection")


def build_op_model(case):
    node_inputs = [name for _, name, _ in case.inputs]
    node_outputs = [name for name, _ in case.outputs]
    attrs = {}
    for name, (kind, value) in case.attrs.items():
        if kind == "dtype":
            attrs[name] = NP_TO_ONNX[value]
        elif kind == "tensor":  # stored as raw_data
            attrs[name] = numpy_helper.from_array(np.array(value, copy=True, order="C"), name)
        elif kind == "tensor_fields":  # stored in the typed *_data fields
            attrs[name] = helper.make_tensor(name, NP_TO_ONNX[value.dtype], list(value.shape),
                                             value.flatten().tolist())
        else:
            attrs[name] = value
    node = helper.make_node(case.op, node_inputs, node_outputs, name=case.name, **attrs)
    graph_inputs = [value_info(n, NP_TO_ONNX[a.dtype], list(a.shape))
                    for kind, n, a in case.inputs if kind == "input"]
    initializers = [init(n, a) for kind, n, a in case.inputs if kind == "const"]
    graph_outputs = [value_info(n, NP_TO_ONNX[a.dtype], list(a.shape)) for n, a in case.outputs]
    graph = helper.make_graph([node], case.name, graph_inputs, graph_outputs,
                              initializer=initializers)
    return make_model(graph, case.opset)


def attr_text(name, kind, value):
    # A STRINGS attribute is stated as its items joined by ',', as the loader passes it on.
    if kind == "strings":
        return f"attr {name} string " + ",".join(value)
    if kind == "int":
        return f"attr {name} int {int(value)}"
    if kind == "float":
        return f"attr {name} float {float(value):.9g}"
    if kind == "ints":
        return f"attr {name} ints " + ",".join(str(int(v)) for v in value)
    if kind == "floats":
        return f"attr {name} floats " + ",".join(f"{float(v):.9g}" for v in value)
    if kind == "dtype":
        return f"attr {name} int {NP_TO_ONNX[value]}"
    if kind == "string":
        return f"attr {name} string {value}"
    if kind in ("tensor", "tensor_fields"):
        flat = value.flatten()
        if value.dtype.kind == "f":
            text = ",".join(f"{float(v):.9g}" for v in flat)
        else:
            text = ",".join(str(int(v)) for v in flat)
        return f"attr {name} tensor {NP_TO_NAME[value.dtype]} {dims_text(value.shape)} {text}"
    raise ValueError(kind)


def write_op_fixtures(w):
    names = set()
    for case in op_cases():
        assert case.name not in names, case.name
        names.add(case.name)
        case_dir = os.path.join("tests/fixtures/ops", case.name)
        w.write_model(os.path.join(case_dir, "model.onnx"), build_op_model(case))
        header = ["model model.onnx", f"op {case.op}", f"opset {case.opset}"]
        header += [attr_text(n, k, v) for n, (k, v) in sorted(case.attrs.items())]
        write_case(w, case_dir, header, case.inputs, case.outputs, case.tol)
    return len(names)


# ---------------------------------------------------------------------------------------
# Example models


def build_mlp():
    """input FP32 [batch,64] -> (Gemm, Relu) x2 -> Gemm -> Softmax -> probabilities [batch,10]."""
    rng = np.random.default_rng(42)
    sizes = [64, 128, 64, 10]
    nodes, inits, params = [], [], []
    x = "input"
    for i in range(3):
        fan_in, fan_out = sizes[i], sizes[i + 1]
        # Stored [out, in] with transB=1, as PyTorch's exporter writes nn.Linear.
        w = (rng.standard_normal((fan_out, fan_in)) * math.sqrt(2.0 / fan_in)).astype(np.float32)
        b = (rng.standard_normal((fan_out,)) * 0.1).astype(np.float32)
        inits += [init(f"fc{i}.weight", w), init(f"fc{i}.bias", b)]
        params.append((w, b))
        y = f"fc{i}"
        nodes.append(helper.make_node("Gemm", [x, f"fc{i}.weight", f"fc{i}.bias"], [y],
                                      name=f"fc{i}", transB=1))
        x = y
        if i < 2:
            nodes.append(helper.make_node("Relu", [x], [f"relu{i}"], name=f"relu{i}"))
            x = f"relu{i}"
    nodes.append(helper.make_node("Softmax", [x], ["probabilities"], name="softmax", axis=-1))
    graph = helper.make_graph(nodes, "mlp", [value_info("input", TensorProto.FLOAT, ["batch", 64])],
                              [value_info("probabilities", TensorProto.FLOAT, ["batch", 10])],
                              initializer=inits)
    model = make_model(graph, 13)

    def reference(inp):
        h = inp
        for i, (w, b) in enumerate(params):
            h = gemm(h, w, b, 1.0, 1.0, False, True)
            if i < 2:
                h = relu(h)
        return softmax(h, -1)

    return model, reference


RECSYS_FEATURES = 4
RECSYS_BAG = 8
RECSYS_ROWS = 100_000
RECSYS_DIM = 32
RECSYS_DENSE = 13


def build_recsys():
    """sparse_ids INT64 [batch,4,8], dense FP32 [batch,13] -> score FP32 [batch,1].

    Feature f's ids are sparse_ids[:, f, :] (Gather axis=1 with a scalar index); each id
    picks a row of table f (Gather axis=0), the bag of 8 rows is averaged (ReduceMean over
    axis 1), the four bags and the dense features are concatenated (4*32+13 = 141) and go
    through Gemm/Relu 141->64->32 and Gemm 32->1 -> Sigmoid.
    """
    rng = np.random.default_rng(7)
    nodes, inits = [], []
    tables = []
    bags = []
    for f in range(RECSYS_FEATURES):
        table = (rng.standard_normal((RECSYS_ROWS, RECSYS_DIM), dtype=np.float32) * 0.05)
        tables.append(table)
        inits += [init(f"emb{f}.table", table), init(f"feature{f}.index", np.array(f, np.int64))]
        nodes += [
            helper.make_node("Gather", ["sparse_ids", f"feature{f}.index"], [f"ids{f}"],
                             name=f"select_feature{f}", axis=1),
            helper.make_node("Gather", [f"emb{f}.table", f"ids{f}"], [f"emb{f}"],
                             name=f"lookup{f}", axis=0),
            helper.make_node("ReduceMean", [f"emb{f}"], [f"bag{f}"], name=f"bag{f}", axes=[1],
                             keepdims=0),
        ]
        bags.append(f"bag{f}")
    nodes.append(helper.make_node("Concat", bags + ["dense"], ["features"], name="concat", axis=1))
    sizes = [RECSYS_FEATURES * RECSYS_DIM + RECSYS_DENSE, 64, 32, 1]
    params = []
    x = "features"
    for i in range(3):
        fan_in, fan_out = sizes[i], sizes[i + 1]
        w = (rng.standard_normal((fan_out, fan_in)) * math.sqrt(2.0 / fan_in)).astype(np.float32)
        b = (rng.standard_normal((fan_out,)) * 0.1).astype(np.float32)
        inits += [init(f"fc{i}.weight", w), init(f"fc{i}.bias", b)]
        params.append((w, b))
        nodes.append(helper.make_node("Gemm", [x, f"fc{i}.weight", f"fc{i}.bias"], [f"fc{i}"],
                                      name=f"fc{i}", transB=1))
        x = f"fc{i}"
        if i < 2:
            nodes.append(helper.make_node("Relu", [x], [f"relu{i}"], name=f"relu{i}"))
            x = f"relu{i}"
    nodes.append(helper.make_node("Sigmoid", [x], ["score"], name="sigmoid"))
    graph = helper.make_graph(
        nodes, "recsys",
        [value_info("sparse_ids", TensorProto.INT64, ["batch", RECSYS_FEATURES, RECSYS_BAG]),
         value_info("dense", TensorProto.FLOAT, ["batch", RECSYS_DENSE])],
        [value_info("score", TensorProto.FLOAT, ["batch", 1])], initializer=inits)
    model = make_model(graph, 17)

    def reference(ids, dense):
        pooled = [tables[f][ids[:, f, :]].astype(np.float64).mean(axis=1).astype(np.float32)
                  for f in range(RECSYS_FEATURES)]
        h = np.concatenate(pooled + [dense], axis=1)
        for i, (w, b) in enumerate(params):
            h = gemm(h, w, b, 1.0, 1.0, False, True)
            if i < 2:
                h = relu(h)
        return sigmoid(h)

    return model, reference


TF_SEQ, TF_DIM, TF_HEADS, TF_FF = 8, 16, 2, 32


def build_transformer():
    """x FP32 [batch,8,16] -> one post-LN encoder block (2 heads, GELU FFN) -> y [batch,8,16]."""
    rng = np.random.default_rng(1234)
    hd = TF_DIM // TF_HEADS
    p = {}

    def param(name, shape, scale):
        p[name] = (rng.standard_normal(shape) * scale).astype(np.float32)
        return name

    for n in ("q", "k", "v", "o"):
        param(f"w{n}", (TF_DIM, TF_DIM), 1.0 / math.sqrt(TF_DIM))
        param(f"b{n}", (TF_DIM,), 0.02)
    param("w1", (TF_DIM, TF_FF), 1.0 / math.sqrt(TF_DIM))
    param("b1", (TF_FF,), 0.02)
    param("w2", (TF_FF, TF_DIM), 1.0 / math.sqrt(TF_FF))
    param("b2", (TF_DIM,), 0.02)
    p["ln1.scale"] = (1.0 + 0.1 * rng.standard_normal(TF_DIM)).astype(np.float32)
    p["ln1.bias"] = (0.1 * rng.standard_normal(TF_DIM)).astype(np.float32)
    p["ln2.scale"] = (1.0 + 0.1 * rng.standard_normal(TF_DIM)).astype(np.float32)
    p["ln2.bias"] = (0.1 * rng.standard_normal(TF_DIM)).astype(np.float32)
    consts = {
        "heads_shape": np.array([0, 0, TF_HEADS, hd], np.int64),
        "merge_shape": np.array([0, 0, -1], np.int64),
        "sqrt_hd": np.array(math.sqrt(hd), np.float32),
        "sqrt2": np.array(math.sqrt(2.0), np.float32),
        "one": np.array(1.0, np.float32),
        "half": np.array(0.5, np.float32),
    }
    inits = [init(k, v) for k, v in p.items()] + [init(k, v) for k, v in consts.items()]
    N = helper.make_node
    nodes = []
    for n in ("q", "k", "v"):
        nodes += [N("MatMul", ["x", f"w{n}"], [f"{n}_mm"], name=f"{n}_proj"),
                  N("Add", [f"{n}_mm", f"b{n}"], [f"{n}_lin"], name=f"{n}_bias"),
                  N("Reshape", [f"{n}_lin", "heads_shape"], [f"{n}_heads"], name=f"{n}_split")]
    nodes += [
        N("Transpose", ["q_heads"], ["q_t"], name="q_t", perm=[0, 2, 1, 3]),
        N("Transpose", ["k_heads"], ["k_t"], name="k_t", perm=[0, 2, 3, 1]),
        N("Transpose", ["v_heads"], ["v_t"], name="v_t", perm=[0, 2, 1, 3]),
        N("MatMul", ["q_t", "k_t"], ["scores_raw"], name="scores"),
        N("Div", ["scores_raw", "sqrt_hd"], ["scores"], name="scale"),
        N("Softmax", ["scores"], ["attn"], name="softmax", axis=-1),
        N("MatMul", ["attn", "v_t"], ["ctx_heads"], name="context"),
        N("Transpose", ["ctx_heads"], ["ctx_t"], name="ctx_t", perm=[0, 2, 1, 3]),
        N("Reshape", ["ctx_t", "merge_shape"], ["ctx"], name="merge_heads"),
        N("MatMul", ["ctx", "wo"], ["o_mm"], name="o_proj"),
        N("Add", ["o_mm", "bo"], ["attn_out"], name="o_bias"),
        N("Add", ["x", "attn_out"], ["res1"], name="residual1"),
        N("LayerNormalization", ["res1", "ln1.scale", "ln1.bias"], ["ln1"], name="ln1",
          axis=-1, epsilon=1e-5),
        N("MatMul", ["ln1", "w1"], ["ff1_mm"], name="ff1"),
        N("Add", ["ff1_mm", "b1"], ["ff1"], name="ff1_bias"),
        N("Div", ["ff1", "sqrt2"], ["gelu_div"], name="gelu_div"),
        N("Erf", ["gelu_div"], ["gelu_erf"], name="gelu_erf"),
        N("Add", ["gelu_erf", "one"], ["gelu_add"], name="gelu_add"),
        N("Mul", ["ff1", "gelu_add"], ["gelu_mul"], name="gelu_mul"),
        N("Mul", ["gelu_mul", "half"], ["gelu"], name="gelu_half"),
        N("MatMul", ["gelu", "w2"], ["ff2_mm"], name="ff2"),
        N("Add", ["ff2_mm", "b2"], ["ff2"], name="ff2_bias"),
        N("Add", ["ln1", "ff2"], ["res2"], name="residual2"),
        N("LayerNormalization", ["res2", "ln2.scale", "ln2.bias"], ["y"], name="ln2", axis=-1,
          epsilon=1e-5),
    ]
    graph = helper.make_graph(
        nodes, "transformer", [value_info("x", TensorProto.FLOAT, ["batch", TF_SEQ, TF_DIM])],
        [value_info("y", TensorProto.FLOAT, ["batch", TF_SEQ, TF_DIM])], initializer=inits)
    model = make_model(graph, 17)

    def reference(x):
        b = x.shape[0]

        def lin(h, w, bias):
            return (matmul(h, p[w]) + p[bias]).astype(np.float32)

        q = lin(x, "wq", "bq").reshape(b, TF_SEQ, TF_HEADS, hd).transpose(0, 2, 1, 3)
        k = lin(x, "wk", "bk").reshape(b, TF_SEQ, TF_HEADS, hd).transpose(0, 2, 3, 1)
        v = lin(x, "wv", "bv").reshape(b, TF_SEQ, TF_HEADS, hd).transpose(0, 2, 1, 3)
        attn = softmax(matmul(q, k) / np.float32(math.sqrt(hd)), -1)
        ctx = matmul(attn, v).transpose(0, 2, 1, 3).reshape(b, TF_SEQ, TF_DIM)
        ln1, _, _ = layernorm(x + lin(ctx, "wo", "bo"), p["ln1.scale"], p["ln1.bias"], -1, 1e-5)
        ff = lin(gelu(lin(ln1, "w1", "b1")), "w2", "b2")
        y, _, _ = layernorm(ln1 + ff, p["ln2.scale"], p["ln2.bias"], -1, 1e-5)
        return y

    return model, reference


def write_models(w, only):
    sizes = {}
    model_tol = (1e-5, 1e-4)
    if only in (None, "examples"):
        mlp, mlp_ref = build_mlp()
        w.write("examples/models/mlp/config.pbtxt",
                config_pbtxt("mlp", 64, [("input", "TYPE_FP32", [64])],
                             [("probabilities", "TYPE_FP32", [10])]))
        w.write_model("examples/models/mlp/1/model.onnx", mlp)
        x = np.random.default_rng(100).standard_normal((3, 64)).astype(np.float32)
        write_case(w, "tests/fixtures/models/mlp/reference",
                   ["model ../../../../../examples/models/mlp/1/model.onnx"],
                   [("input", "input", x)], [("probabilities", mlp_ref(x))], model_tol)

        recsys, recsys_ref = build_recsys()
        w.write("examples/models/recsys/config.pbtxt",
                config_pbtxt("recsys", 64,
                             [("sparse_ids", "TYPE_INT64", [RECSYS_FEATURES, RECSYS_BAG]),
                              ("dense", "TYPE_FP32", [RECSYS_DENSE])],
                             [("score", "TYPE_FP32", [1])]))
        w.write_model("examples/models/recsys/1/model.onnx", recsys)
        r = np.random.default_rng(101)
        ids = r.integers(0, RECSYS_ROWS, size=(2, RECSYS_FEATURES, RECSYS_BAG)).astype(np.int64)
        ids[0, 0, 0], ids[1, 3, 7] = 0, RECSYS_ROWS - 1
        dense = r.standard_normal((2, RECSYS_DENSE)).astype(np.float32)
        write_case(w, "tests/fixtures/models/recsys/reference",
                   ["model ../../../../../examples/models/recsys/1/model.onnx"],
                   [("input", "sparse_ids", ids), ("input", "dense", dense)],
                   [("score", recsys_ref(ids, dense))], model_tol)
        sizes["mlp"] = len(mlp.SerializeToString())
        sizes["recsys"] = len(recsys.SerializeToString())

    if only in (None, "fixtures"):
        tf, tf_ref = build_transformer()
        w.write("tests/fixtures/models/transformer/config.pbtxt",
                config_pbtxt("transformer", 8, [("x", "TYPE_FP32", [TF_SEQ, TF_DIM])],
                             [("y", "TYPE_FP32", [TF_SEQ, TF_DIM])]))
        w.write_model("tests/fixtures/models/transformer/1/model.onnx", tf)
        x = np.random.default_rng(102).standard_normal((2, TF_SEQ, TF_DIM)).astype(np.float32)
        write_case(w, "tests/fixtures/models/transformer/reference", ["model ../1/model.onnx"],
                   [("input", "x", x)], [("y", tf_ref(x))], model_tol)
        sizes["transformer"] = len(tf.SerializeToString())
    return sizes


# ---------------------------------------------------------------------------------------
# Graph-handling models: the patterns exporters (torch.onnx) write, each with numpy
# references, under tests/fixtures/graphs/<name>/{model.onnx,<case>/case.txt}.


def write_graph_case(w, name, case, inputs, outputs):
    write_case(w, f"tests/fixtures/graphs/{name}/{case}", ["model ../model.onnx"],
               [("input", n, a) for n, a in inputs], outputs, (1e-6, 1e-5))


def build_constants():
    """Constant nodes of every attribute kind feeding ops; one output is constant alone."""
    raw = np.array([0.5, -1.0, 2.0], dtype=np.float32)
    typed = [1.5, 2.0, -0.5]
    nodes = [
        helper.make_node("Constant", [], ["c_raw"], name="c_raw",
                         value=numpy_helper.from_array(raw, "c_raw")),
        helper.make_node("Constant", [], ["c_typed"], name="c_typed",
                         value=helper.make_tensor("t", TensorProto.FLOAT, [3], typed)),
        helper.make_node("Constant", [], ["c_float"], name="c_float", value_float=0.25),
        helper.make_node("Constant", [], ["c_floats"], name="c_floats",
                         value_floats=[1.0, 2.0, 3.0]),
        helper.make_node("Constant", [], ["c_shape"], name="c_shape",
                         value=helper.make_tensor("s", TensorProto.INT64, [2], [3, 2])),
        helper.make_node("Constant", [], ["c_int"], name="c_int", value_int=1),
        helper.make_node("Constant", [], ["c_ints"], name="c_ints", value_ints=[0]),
        helper.make_node("Constant", [], ["c_i32"], name="c_i32",
                         value=helper.make_tensor("i", TensorProto.INT32, [2], [7, -3])),
        helper.make_node("Add", ["x", "c_raw"], ["a"], name="add"),
        helper.make_node("Mul", ["a", "c_typed"], ["m"], name="mul"),
        helper.make_node("Add", ["m", "c_float"], ["f"], name="add_float"),
        helper.make_node("Add", ["f", "c_floats"], ["g"], name="add_floats"),
        helper.make_node("Reshape", ["g", "c_shape"], ["y"], name="reshape"),
        helper.make_node("Gather", ["x", "c_int"], ["col"], name="gather", axis=1),
        helper.make_node("Unsqueeze", ["col", "c_ints"], ["z"], name="unsqueeze"),
        helper.make_node("Cast", ["c_i32"], ["w"], name="cast", to=TensorProto.FLOAT),
    ]
    graph = helper.make_graph(
        nodes, "constants", [value_info("x", TensorProto.FLOAT, [2, 3])],
        [value_info("y", TensorProto.FLOAT, [3, 2]), value_info("z", TensorProto.FLOAT, [1, 2]),
         value_info("w", TensorProto.FLOAT, [2])])

    def reference(x):
        g = (x + raw) * np.array(typed, np.float32) + np.float32(0.25) + \
            np.array([1, 2, 3], np.float32)
        return [("y", g.reshape(3, 2)), ("z", x[:, 1][None, :]),
                ("w", np.array([7, -3], np.float32))]
    return make_model(graph, 17), reference


def build_dropout_identity():
    """Identity and Dropout chains, one of each producing a graph output directly."""
    nodes = [
        helper.make_node("Identity", ["x"], ["a"], name="id_in"),
        helper.make_node("Dropout", ["a", "ratio", "training"], ["b", "unused_mask"],
                         name="drop_mid"),
        helper.make_node("Relu", ["b"], ["c"], name="relu"),
        helper.make_node("Identity", ["c"], ["y"], name="id_out"),
        helper.make_node("Dropout", ["x"], ["y2"], name="drop_out"),
    ]
    graph = helper.make_graph(
        nodes, "dropout_identity", [value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [value_info("y", TensorProto.FLOAT, ["batch", 4]),
         value_info("y2", TensorProto.FLOAT, ["batch", 4])],
        initializer=[init("ratio", np.array(0.3, np.float32)),
                     init("training", np.array(False))])
    return make_model(graph, 13), lambda x: [("y", relu(x)), ("y2", x.copy())]


def build_folding():
    """A weight computed from initializers and Constants only: folded to one initializer."""
    r = np.random.default_rng(110)
    w0 = r.standard_normal((4, 4)).astype(np.float32)
    delta = r.standard_normal((4, 4)).astype(np.float32)
    nodes = [
        helper.make_node("Constant", [], ["delta"], name="delta",
                         value=numpy_helper.from_array(delta, "delta")),
        helper.make_node("Add", ["w0", "delta"], ["wsum"], name="wsum"),
        helper.make_node("Transpose", ["wsum"], ["wt"], name="wt", perm=[1, 0]),
        helper.make_node("Constant", [], ["two"], name="two", value_float=2.0),
        helper.make_node("Mul", ["wt", "two"], ["w"], name="w"),
        helper.make_node("MatMul", ["x", "w"], ["y"], name="matmul"),
    ]
    graph = helper.make_graph(
        nodes, "folding", [value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [value_info("y", TensorProto.FLOAT, ["batch", 4])], initializer=[init("w0", w0)])
    w = ((w0 + delta).T * np.float32(2.0)).astype(np.float32)
    return make_model(graph, 17), lambda x: [("y", matmul(x, w))]


DYN_DIM = 8


def build_shape_reshape():
    """The transformer exporters' head split: Shape -> Gather -> Unsqueeze -> Concat ->
    Reshape with the request's batch and sequence length, plus shape values used as data."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        helper.make_node("Gather", ["s", "i0"], ["b"], name="gather_batch", axis=0),
        helper.make_node("Gather", ["s", "i1"], ["seq"], name="gather_seq", axis=0),
        helper.make_node("Unsqueeze", ["b", "axes0"], ["b1"], name="unsqueeze_batch"),
        helper.make_node("Unsqueeze", ["seq", "axes0"], ["seq1"], name="unsqueeze_seq"),
        helper.make_node("Concat", ["b1", "seq1", "heads"], ["split"], name="concat", axis=0),
        helper.make_node("Reshape", ["x", "split"], ["r"], name="reshape_heads"),
        helper.make_node("Transpose", ["r"], ["heads_first"], name="transpose",
                         perm=[0, 2, 1, 3]),
        helper.make_node("Mul", ["b", "seq"], ["rows"], name="rows"),
        helper.make_node("Unsqueeze", ["rows", "axes0"], ["rows1"], name="unsqueeze_rows"),
        helper.make_node("Concat", ["rows1", "width"], ["flat"], name="concat_flat", axis=0),
        helper.make_node("Reshape", ["x", "flat"], ["flat_x"], name="reshape_flat"),
        helper.make_node("Cast", ["seq1"], ["seq_f"], name="cast_seq", to=TensorProto.FLOAT),
        helper.make_node("Mul", ["x", "seq_f"], ["scaled"], name="scale_by_seq"),
        helper.make_node("Size", ["x"], ["numel"], name="size"),
    ]
    graph = helper.make_graph(
        nodes, "shape_reshape", [value_info("x", TensorProto.FLOAT, ["batch", "seq", DYN_DIM])],
        [value_info("heads_first", TensorProto.FLOAT, ["batch", 2, "seq", 4]),
         value_info("flat_x", TensorProto.FLOAT, [None, DYN_DIM]),
         value_info("scaled", TensorProto.FLOAT, ["batch", "seq", DYN_DIM]),
         value_info("numel", TensorProto.INT64, [])],
        initializer=[init("i0", np.array(0, np.int64)), init("i1", np.array(1, np.int64)),
                     init("axes0", np.array([0], np.int64)),
                     init("heads", np.array([2, 4], np.int64)),
                     init("width", np.array([DYN_DIM], np.int64))])

    def reference(x):
        b, s, _ = x.shape
        return [("heads_first", x.reshape(b, s, 2, 4).transpose(0, 2, 1, 3)),
                ("flat_x", x.reshape(b * s, DYN_DIM)), ("scaled", x * np.float32(s)),
                ("numel", np.array(x.size, np.int64))]
    return make_model(graph, 15), reference


def build_value_dependent_shape():
    """A Reshape whose shape is computed from a graph input's values: read per request."""
    nodes = [
        helper.make_node("Add", ["dims", "one"], ["dims1"], name="dims_plus_one"),
        helper.make_node("Reshape", ["x", "dims1"], ["y"], name="reshape_by_values"),
    ]
    graph = helper.make_graph(
        nodes, "value_dependent_shape",
        [value_info("x", TensorProto.FLOAT, [2, 3]), value_info("dims", TensorProto.INT64, [2])],
        [value_info("y", TensorProto.FLOAT, None)],
        initializer=[init("one", np.array([1], np.int64))])
    return make_model(graph, 17)


def build_if_branches():
    """If as exporters write it: a condition from the data (a sum's sign) choosing between
    a branch with its own initializer and outer-scope reads and a branch holding a nested
    If; and a condition from the shape (batch == 1) whose then branch is an Identity of an
    outer value, as torchvision's exports have."""
    w = np.array([0.5, -1.0, 2.0, 0.25], np.float32)
    then_b = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["t1"], name="double"),
         helper.make_node("Add", ["t1", "w"], ["t_out"], name="add_w")],
        "then_b", [], [value_info("t_out", TensorProto.FLOAT, ["batch", 4])],
        initializer=[init("two", np.array([2.0], np.float32))])
    inner_then = helper.make_graph(
        [helper.make_node("Sub", ["x", "w"], ["i_then"], name="sub_w")],
        "inner_then", [], [value_info("i_then", TensorProto.FLOAT, ["batch", 4])])
    inner_else = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["i_else"], name="neg")],
        "inner_else", [], [value_info("i_else", TensorProto.FLOAT, ["batch", 4])])
    else_b = helper.make_graph(
        [helper.make_node("ReduceMax", ["x"], ["mx"], name="max", keepdims=0),
         helper.make_node("Constant", [], ["minus_one"], name="minus_one", value_float=-1.0),
         helper.make_node("Greater", ["mx", "minus_one"], ["c2"], name="above"),
         helper.make_node("If", ["c2"], ["t_out"], name="inner_if",
                          then_branch=inner_then, else_branch=inner_else)],
        "else_b", [], [value_info("t_out", TensorProto.FLOAT, ["batch", 4])])
    one_then = helper.make_graph(
        [helper.make_node("Identity", ["row_sum"], ["r_then"], name="pass_sum")],
        "one_then", [], [value_info("r_then", TensorProto.FLOAT, ["batch"])])
    one_else = helper.make_graph(
        [helper.make_node("ReduceMax", ["x"], ["r_else"], name="row_max", axes=[1], keepdims=0)],
        "one_else", [], [value_info("r_else", TensorProto.FLOAT, ["batch"])])
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["total"], name="total", keepdims=0),
        helper.make_node("Greater", ["total", "zero"], ["positive"], name="positive"),
        helper.make_node("If", ["positive"], ["y"], name="by_sign",
                         then_branch=then_b, else_branch=else_b),
        helper.make_node("ReduceSum", ["x", "axis1"], ["row_sum"], name="row_sum", keepdims=0),
        helper.make_node("Shape", ["x"], ["shape"], name="shape"),
        helper.make_node("Gather", ["shape", "i0"], ["batch"], name="batch", axis=0),
        helper.make_node("Equal", ["batch", "one"], ["single"], name="single"),
        helper.make_node("If", ["single"], ["y2"], name="by_batch",
                         then_branch=one_then, else_branch=one_else),
    ]
    graph = helper.make_graph(
        nodes, "if_branches", [value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [value_info("y", TensorProto.FLOAT, ["batch", 4]),
         value_info("y2", TensorProto.FLOAT, ["batch"])],
        initializer=[init("w", w), init("zero", np.array(0.0, np.float32)),
                     init("i0", np.array(0, np.int64)), init("one", np.array(1, np.int64)),
                     init("axis1", np.array([1], np.int64))])

    def reference(x):
        if x.sum() > 0:
            y = x * np.float32(2.0) + w
        elif x.max() > -1.0:
            y = x - w
        else:
            y = -x
        y2 = x.sum(axis=1) if x.shape[0] == 1 else x.max(axis=1)
        return [("y", y.astype(np.float32)), ("y2", y2.astype(np.float32))]
    return make_model(graph, 17), reference


# ---------------------------------------------------------------------------------------
# Loop as exporters write it: the loader inlines the body into the graph and the engine
# runs its nodes once per iteration (PyTorch's lists become scan outputs). Fixtures under
# tests/fixtures/graphs/loop_*, tested by tests/unit/engine/loop_test.cc.

FLOAT, INT64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def const_node(name, arr):
    """A Constant node named like its output, as torch.onnx writes them (in bodies too)."""
    return helper.make_node("Constant", [], [name], name=name,
                            value=numpy_helper.from_array(np.array(arr, copy=True), name))


def build_loop_scan():
    """`for i in range(x.shape[0])` as torch.onnx writes it: the trip count is x.shape[0]
    (Shape -> Gather, a host value) and the condition a constant true that the body passes
    on. The body reads row `i` of the outer x (Gather), an outer initializer `w` and the
    graph input `bias`, carries a running sum that an outer node reads after the loop, and
    has two scan outputs: a row per iteration ([M, 4]) and the iteration number itself
    (a body input passed through, stacked into [M])."""
    w = np.array([0.5, -1.0, 2.0, 0.25], np.float32)
    acc0 = np.array([0.1, 0.2, 0.3, 0.4], np.float32)
    body = helper.make_graph(
        [helper.make_node("Gather", ["x", "i"], ["row"], name="row", axis=0),
         helper.make_node("Mul", ["row", "w"], ["scaled"], name="scale"),
         helper.make_node("Add", ["scaled", "bias"], ["term"], name="add_bias"),
         helper.make_node("Add", ["acc_in", "term"], ["acc_out"], name="accumulate"),
         helper.make_node("Cast", ["i"], ["i_f"], name="iter_f", to=FLOAT),
         helper.make_node("Add", ["acc_out", "i_f"], ["scan_row"], name="scan_row"),
         helper.make_node("Identity", ["i"], ["scan_iter"], name="scan_iter"),
         helper.make_node("Identity", ["c_in"], ["c_out"], name="keep_going")],
        "scan_body",
        [value_info("i", INT64, []), value_info("c_in", BOOL, []),
         value_info("acc_in", FLOAT, [4])],
        [value_info("c_out", BOOL, []), value_info("acc_out", FLOAT, [4]),
         value_info("scan_row", FLOAT, [4]), value_info("scan_iter", INT64, [])])
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"], name="shape"),
        helper.make_node("Gather", ["shape", "i0"], ["rows"], name="rows", axis=0),
        const_node("true", np.array(True)),
        helper.make_node("Loop", ["rows", "true", "acc0"], ["acc", "scan_rows", "iters"],
                         name="scan_loop", body=body),
        helper.make_node("Mul", ["acc", "two"], ["sum2"], name="double_sum"),
    ]
    graph = helper.make_graph(
        nodes, "loop_scan",
        [value_info("x", FLOAT, ["batch", 4]), value_info("bias", FLOAT, [4])],
        [value_info("sum2", FLOAT, [4]), value_info("scan_rows", FLOAT, ["batch", 4]),
         value_info("iters", INT64, ["batch"])],
        initializer=[init("w", w), init("acc0", acc0), init("i0", np.array(0, np.int64)),
                     init("two", np.array(2.0, np.float32))])

    def reference(x, bias):
        acc, rows = acc0.copy(), []
        for i in range(x.shape[0]):
            acc = acc + (x[i] * w + bias)
            rows.append(acc + np.float32(i))
        return [("sum2", acc * np.float32(2.0)),
                ("scan_rows", np.stack(rows).astype(np.float32).reshape(-1, 4)),
                ("iters", np.arange(x.shape[0], dtype=np.int64))]
    return make_model(graph, 17), reference


def build_loop_while():
    """While loops. `doubling` has no trip count (M absent): its condition is computed from
    the data before the loop and again in the body (double v while its sum is below the
    graph input `limit`, which the body reads), and it carries a counter and the last
    iteration number (-1 when no iteration runs). `halving` is what torch.onnx writes for
    a scripted `while`: M is INT64's largest value, the body ignores its condition input
    and holds its own Constant nodes. Both start from x and share an initializer."""
    dbody = helper.make_graph(
        [helper.make_node("Mul", ["v_in", "two"], ["v_out"], name="double"),
         helper.make_node("Add", ["n_in", "one"], ["n_out"], name="count"),
         helper.make_node("Identity", ["i"], ["last_out"], name="last"),
         helper.make_node("ReduceSum", ["v_out"], ["s"], name="sum", keepdims=0),
         helper.make_node("Less", ["s", "limit"], ["c_out"], name="below")],
        "doubling_body",
        [value_info("i", INT64, []), value_info("c_in", BOOL, []),
         value_info("v_in", FLOAT, ["rows", 3]), value_info("n_in", INT64, []),
         value_info("last_in", INT64, [])],
        [value_info("c_out", BOOL, []), value_info("v_out", FLOAT, ["rows", 3]),
         value_info("n_out", INT64, []), value_info("last_out", INT64, [])])
    hbody = helper.make_graph(
        [const_node("half", np.array(0.5, np.float32)),
         helper.make_node("Mul", ["h_in", "half"], ["h_out"], name="halve"),
         const_node("one_step", np.array(1, np.int64)),
         helper.make_node("Add", ["k_in", "one_step"], ["k_out"], name="count"),
         helper.make_node("ReduceSum", ["h_out"], ["hs"], name="sum", keepdims=0),
         helper.make_node("Greater", ["hs", "limit"], ["c2_out"], name="above")],
        "halving_body",
        [value_info("8", INT64, []), value_info("cond", BOOL, []),
         value_info("h_in", FLOAT, ["rows", 3]), value_info("k_in", INT64, [])],
        [value_info("c2_out", BOOL, []), value_info("h_out", FLOAT, ["rows", 3]),
         value_info("k_out", INT64, [])])
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["total"], name="total", keepdims=0),
        helper.make_node("Less", ["total", "limit"], ["go"], name="go"),
        helper.make_node("Loop", ["", "go", "x", "zero", "minus_one"],
                         ["doubled", "doublings", "last_iter"], name="doubling", body=dbody),
        const_node("big", np.array(np.iinfo(np.int64).max, np.int64)),
        helper.make_node("Greater", ["total", "limit"], ["go2"], name="go2"),
        helper.make_node("Loop", ["big", "go2", "x", "zero"], ["halved", "halvings"],
                         name="halving", body=hbody),
    ]
    graph = helper.make_graph(
        nodes, "loop_while",
        [value_info("x", FLOAT, ["rows", 3]), value_info("limit", FLOAT, [])],
        [value_info("doubled", FLOAT, ["rows", 3]), value_info("doublings", INT64, []),
         value_info("last_iter", INT64, []), value_info("halved", FLOAT, ["rows", 3]),
         value_info("halvings", INT64, [])],
        initializer=[init("two", np.array(2.0, np.float32)), init("one", np.array(1, np.int64)),
                     init("zero", np.array(0, np.int64)),
                     init("minus_one", np.array(-1, np.int64))])

    def reference(x, limit):
        v, n, last = x.copy(), 0, -1
        go = x.sum() < limit
        while go:
            v = v * np.float32(2.0)
            n, last = n + 1, n
            go = v.sum() < limit
        h, k = x.copy(), 0
        go = x.sum() > limit
        while go:
            h = h * np.float32(0.5)
            k += 1
            go = h.sum() > limit
        return [("doubled", v), ("doublings", np.array(n, np.int64)),
                ("last_iter", np.array(last, np.int64)), ("halved", h),
                ("halvings", np.array(k, np.int64))]
    return make_model(graph, 17), reference


def build_loop_growing():
    """A carried tensor that grows by a row per iteration, the way torchvision's Mask R-CNN
    pastes masks: it starts empty ([0, 4], ConstantOfShape), the trip count is the INT64
    scalar input n (cond absent), and the body's input declares it [0, 4] as torch.onnx
    does although it grows. The body holds an If (even iterations take row 0 of x times k,
    odd ones row 1 plus k; the branches read x and the body's k) and a nested Loop of k + 1
    iterations over the chosen row, whose body reads the outer initializer w, its own
    iteration number and the enclosing body's k, with a scan output the body sums. The
    outer loop's scan output (each new row's sum, a scalar) is [0] when n is 0."""
    w = np.array([0.25, -0.5, 1.0, 2.0], np.float32)
    then_b = helper.make_graph(
        [helper.make_node("Slice", ["x", "s0", "s1", "ax0"], ["r0"], name="row0"),
         helper.make_node("Sub", ["r0", "kf"], ["even_row"], name="minus_k")],
        "even", [], [value_info("even_row", FLOAT, [1, 4])])
    else_b = helper.make_graph(
        [helper.make_node("Slice", ["x", "s1", "s2", "ax0"], ["r1"], name="row1"),
         helper.make_node("Add", ["r1", "kf"], ["odd_row"], name="plus_k")],
        "odd", [], [value_info("odd_row", FLOAT, [1, 4])])
    inner = helper.make_graph(
        [helper.make_node("Mul", ["r_in", "half"], ["rh"], name="halve"),
         helper.make_node("Cast", ["j"], ["jf"], name="j_f", to=FLOAT),
         helper.make_node("Mul", ["jf", "w"], ["jw"], name="j_w"),
         helper.make_node("Add", ["rh", "jw"], ["t"], name="add_jw"),
         helper.make_node("Add", ["t", "kf"], ["r_out"], name="add_k"),
         helper.make_node("Identity", ["c2_in"], ["c2_out"], name="keep_going")],
        "refine_body",
        [value_info("j", INT64, []), value_info("c2_in", BOOL, []),
         value_info("r_in", FLOAT, [1, 4])],
        [value_info("c2_out", BOOL, []), value_info("r_out", FLOAT, [1, 4]),
         value_info("r_out_scan", FLOAT, [1, 4])])
    # A body output may not be listed twice: the scan output is its own Identity.
    inner.node.append(helper.make_node("Identity", ["r_out"], ["r_out_scan"], name="scan"))
    body = helper.make_graph(
        [helper.make_node("Mod", ["k", "two_i"], ["parity"], name="parity"),
         helper.make_node("Equal", ["parity", "zero_i"], ["even"], name="even"),
         helper.make_node("Cast", ["k"], ["kf"], name="k_f", to=FLOAT),
         helper.make_node("If", ["even"], ["picked"], name="pick", then_branch=then_b,
                          else_branch=else_b),
         helper.make_node("Add", ["k", "one_i"], ["inner_trips"], name="inner_trips"),
         helper.make_node("Loop", ["inner_trips", "", "picked"], ["refined", "steps"],
                          name="refine", body=inner),
         helper.make_node("ReduceSum", ["steps", "ax0"], ["steps_sum"], name="steps_sum",
                          keepdims=0),
         helper.make_node("Add", ["refined", "steps_sum"], ["new_row"], name="new_row"),
         helper.make_node("Concat", ["acc_in", "new_row"], ["acc_out"], name="paste", axis=0),
         helper.make_node("ReduceSum", ["new_row"], ["row_total"], name="row_total",
                          keepdims=0),
         helper.make_node("Identity", ["c_in"], ["c_out"], name="keep_going")],
        "grow_body",
        [value_info("k", INT64, []), value_info("c_in", BOOL, []),
         value_info("acc_in", FLOAT, [0, 4])],
        [value_info("c_out", BOOL, []), value_info("acc_out", FLOAT, [None, 4]),
         value_info("row_total", FLOAT, [])])
    nodes = [
        helper.make_node("ConstantOfShape", ["empty_shape"], ["acc0"], name="empty",
                         value=numpy_helper.from_array(np.array([0.0], np.float32), "value")),
        helper.make_node("Loop", ["n", "", "acc0"], ["rows", "row_totals"], name="grow",
                         body=body),
        helper.make_node("ReduceSum", ["rows"], ["total"], name="total", keepdims=0),
    ]
    graph = helper.make_graph(
        nodes, "loop_growing",
        [value_info("x", FLOAT, [2, 4]), value_info("n", INT64, [])],
        [value_info("rows", FLOAT, [None, 4]), value_info("row_totals", FLOAT, ["n"]),
         value_info("total", FLOAT, [])],
        initializer=[init("w", w), init("empty_shape", np.array([0, 4], np.int64)),
                     init("half", np.array(0.5, np.float32)),
                     init("two_i", np.array(2, np.int64)), init("zero_i", np.array(0, np.int64)),
                     init("one_i", np.array(1, np.int64)), init("s0", np.array([0], np.int64)),
                     init("s1", np.array([1], np.int64)), init("s2", np.array([2], np.int64)),
                     init("ax0", np.array([0], np.int64))])

    def reference(x, n):
        acc, totals = np.zeros((0, 4), np.float32), []
        for k in range(int(n)):
            kf = np.float32(k)
            r = x[0:1] - kf if k % 2 == 0 else x[1:2] + kf
            steps = []
            for j in range(k + 1):
                r = (r * np.float32(0.5) + np.float32(j) * w) + kf
                steps.append(r)
            new_row = r + np.stack(steps).astype(np.float64).sum(axis=0).astype(np.float32)
            acc = np.concatenate([acc, new_row], axis=0)
            totals.append(new_row.astype(np.float64).sum())
        return [("rows", acc.astype(np.float32)),
                ("row_totals", np.array(totals, np.float32).reshape(-1)),
                ("total", np.array(acc.astype(np.float64).sum(), np.float32))]
    return make_model(graph, 17), reference


def seq_value_info(name, dtype, rank):
    """A sequence of tensors of unknown dims, as torch.onnx declares its lists."""
    return helper.make_tensor_sequence_value_info(name, dtype, [None] * rank)


def build_loop_sequence():
    """A scripted RNN-style loop with Python lists, node for node what torch.onnx 1.13
    writes for `outs.append(h)` / `torch.stack(outs, 1)` and `rows.append(h * 2)` /
    `torch.cat(rows, 0)` over x of [T, 2, 3]: SequenceEmpty initial values, one
    SequenceInsert per list in the body (a body output), ConcatFromSequence after the loop
    (axis 1 new_axis 1: [2, T, 3]; axis 0 new_axis absent: [2T, 3]). The trip count is
    x.shape[0], the condition an outer Constant true the body returns through an Identity,
    the carried h is an output nobody reads, and the outputs' declared dims are torch's
    made-up names, shared between outputs whose dims differ."""
    body = helper.make_graph(
        [const_node("/Constant_3_output_0", np.array(0.5, np.float32)),
         helper.make_node("Mul", ["h.13", "/Constant_3_output_0"], ["/Mul_output_0"],
                          name="/Mul"),
         helper.make_node("Gather", ["x", "i.1"], ["/Gather_2_output_0"], name="/Gather_2",
                          axis=0),
         helper.make_node("Add", ["/Mul_output_0", "/Gather_2_output_0"], ["/Add_output_0"],
                          name="/Add"),
         helper.make_node("SequenceInsert", ["16", "/Add_output_0"],
                          ["/SequenceInsert_output_0"], name="/SequenceInsert"),
         const_node("/Constant_4_output_0", np.array(2.0, np.float32)),
         helper.make_node("Mul", ["/Add_output_0", "/Constant_4_output_0"],
                          ["/Mul_1_output_0"], name="/Mul_1"),
         helper.make_node("SequenceInsert", ["17", "/Mul_1_output_0"],
                          ["/SequenceInsert_1_output_0"], name="/SequenceInsert_1"),
         helper.make_node("Identity", ["/Constant_1_output_0"], ["/Identity_output_0"],
                          name="/Identity")],
        "torch_jit1",
        [value_info("i.1", INT64, []), value_info("cond", BOOL, []),
         value_info("h.13", FLOAT, [2, 3]), seq_value_info("16", FLOAT, 2),
         seq_value_info("17", FLOAT, 2)],
        [value_info("/Identity_output_0", BOOL, []),
         value_info("/Add_output_0", FLOAT, ["Add/Add_output_0_dim_0",
                                             "Add/Add_output_0_dim_1"]),
         seq_value_info("/SequenceInsert_output_0", FLOAT, 2),
         seq_value_info("/SequenceInsert_1_output_0", FLOAT, 2)])
    nodes = [
        const_node("/Constant_output_0", np.array(0, np.int64)),
        const_node("/Constant_1_output_0", np.array(True)),
        helper.make_node("SequenceEmpty", [], ["/SequenceEmpty_output_0"], name="/SequenceEmpty",
                         dtype=FLOAT),
        helper.make_node("SequenceEmpty", [], ["/SequenceEmpty_1_output_0"],
                         name="/SequenceEmpty_1", dtype=FLOAT),
        helper.make_node("Gather", ["x", "/Constant_output_0"], ["/Gather_output_0"],
                         name="/Gather", axis=0),
        helper.make_node("Shape", ["x"], ["/Shape_output_0"], name="/Shape"),
        const_node("/Constant_2_output_0", np.array(0, np.int64)),
        helper.make_node("Gather", ["/Shape_output_0", "/Constant_2_output_0"],
                         ["/Gather_1_output_0"], name="/Gather_1", axis=0),
        helper.make_node("Loop", ["/Gather_1_output_0", "/Constant_1_output_0",
                                  "/Gather_output_0", "/SequenceEmpty_output_0",
                                  "/SequenceEmpty_1_output_0"],
                         ["/Loop_output_0", "/Loop_output_1", "/Loop_output_2"], name="/Loop",
                         body=body),
        helper.make_node("ConcatFromSequence", ["/Loop_output_1"], ["stacked"],
                         name="/ConcatFromSequence", axis=1, new_axis=1),
        helper.make_node("ConcatFromSequence", ["/Loop_output_2"], ["concatenated"],
                         name="/ConcatFromSequence_1", axis=0),
    ]
    dims = ["ConcatFromSequence29_dim_0", "ConcatFromSequence29_dim_1",
            "ConcatFromSequence29_dim_2"]
    graph = helper.make_graph(
        nodes, "torch_jit", [value_info("x", FLOAT, ["T", 2, 3])],
        [value_info("stacked", FLOAT, dims), value_info("concatenated", FLOAT, dims[:2])])

    def reference(x):
        h, outs, rows = x[0], [], []
        for i in range(x.shape[0]):
            h = h * np.float32(0.5) + x[i]
            outs.append(h)
            rows.append(h * np.float32(2.0))
        return [("stacked", np.stack(outs, 1)), ("concatenated", np.concatenate(rows, 0))]
    return make_model(graph, 17), reference


def build_loop_sequence_reread():
    """One list read twice after the loop, as torch.onnx writes `torch.stack(outs, -1)` and
    `torch.stack(outs)` of the same list: two ConcatFromSequence (axis -1 and axis 0, both
    new_axis 1) of one SequenceInsert'ed sequence, over x of [T, 2, 4]."""
    body = helper.make_graph(
        [helper.make_node("Gather", ["x", "i"], ["xi"], name="xi", axis=0),
         helper.make_node("Mul", ["h_in", "half"], ["hh"], name="halve"),
         helper.make_node("Add", ["hh", "xi"], ["pre"], name="add_x"),
         helper.make_node("Relu", ["pre"], ["h_out"], name="relu"),
         helper.make_node("SequenceInsert", ["outs_in", "h_out"], ["outs_out"], name="append"),
         helper.make_node("Identity", ["true"], ["c_out"], name="keep_going")],
        "reread_body",
        [value_info("i", INT64, []), value_info("cond", BOOL, []),
         value_info("h_in", FLOAT, [2, 4]), seq_value_info("outs_in", FLOAT, 2)],
        [value_info("c_out", BOOL, []), value_info("h_out", FLOAT, [2, 4]),
         seq_value_info("outs_out", FLOAT, 2)])
    nodes = [
        const_node("true", np.array(True)),
        helper.make_node("SequenceEmpty", [], ["outs0"], name="outs0", dtype=FLOAT),
        helper.make_node("Gather", ["x", "i0"], ["h0"], name="h0", axis=0),
        helper.make_node("Shape", ["x"], ["shape"], name="shape"),
        helper.make_node("Gather", ["shape", "i0"], ["steps"], name="steps", axis=0),
        helper.make_node("Loop", ["steps", "true", "h0", "outs0"], ["h_last", "outs"],
                         name="rnn", body=body),
        helper.make_node("ConcatFromSequence", ["outs"], ["stack_last"], name="stack_last",
                         axis=-1, new_axis=1),
        helper.make_node("ConcatFromSequence", ["outs"], ["stack_first"], name="stack_first",
                         axis=0, new_axis=1),
    ]
    graph = helper.make_graph(
        nodes, "loop_sequence_reread", [value_info("x", FLOAT, ["T", 2, 4])],
        [value_info("stack_last", FLOAT, [2, 4, "T"]),
         value_info("stack_first", FLOAT, ["T", 2, 4]),
         value_info("h_last", FLOAT, [2, 4])],
        initializer=[init("i0", np.array(0, np.int64)), init("half", np.array(0.5, np.float32))])

    def reference(x):
        h, outs = x[0], []
        for i in range(x.shape[0]):
            h = relu(h * np.float32(0.5) + x[i])
            outs.append(h)
        return [("stack_last", np.stack(outs, -1)), ("stack_first", np.stack(outs, 0)),
                ("h_last", h)]
    return make_model(graph, 17), reference


def build_loop_ragged_scan():
    """A scan output whose shape can change between iterations: the carried value grows by
    x's rows in an iteration whose If takes its then branch (the BOOL input `grow`) and is
    passed on unchanged otherwise, and every iteration's value is a scan output. With grow
    false (or one iteration) the scan stacks; with grow true and n > 1 it cannot, and the
    request fails (loop_test.cc builds that request)."""
    then_b = helper.make_graph(
        [helper.make_node("Concat", ["acc_in", "x"], ["grown"], name="append_x", axis=0)],
        "grow", [], [value_info("grown", FLOAT, [None, 4])])
    else_b = helper.make_graph(
        [helper.make_node("Identity", ["acc_in"], ["same"], name="same")],
        "keep", [], [value_info("same", FLOAT, [None, 4])])
    body = helper.make_graph(
        [helper.make_node("If", ["grow"], ["acc_out"], name="maybe_grow", then_branch=then_b,
                          else_branch=else_b),
         helper.make_node("Cast", ["i"], ["i_f"], name="i_f", to=FLOAT),
         helper.make_node("Add", ["acc_out", "i_f"], ["scan"], name="scan"),
         helper.make_node("Identity", ["c_in"], ["c_out"], name="keep_going")],
        "ragged_body",
        [value_info("i", INT64, []), value_info("c_in", BOOL, []),
         value_info("acc_in", FLOAT, [None, 4])],
        [value_info("c_out", BOOL, []), value_info("acc_out", FLOAT, [None, 4]),
         value_info("scan", FLOAT, [None, 4])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["n", "", "x"], ["final", "scans"], name="ragged", body=body)],
        "loop_ragged_scan",
        [value_info("x", FLOAT, ["rows", 4]), value_info("n", INT64, []),
         value_info("grow", BOOL, [])],
        [value_info("final", FLOAT, [None, 4]), value_info("scans", FLOAT, [None, None, 4])])

    def reference(x, n, grow):
        acc, scans = x.copy(), []
        for i in range(int(n)):
            if grow:
                acc = np.concatenate([acc, x], axis=0)
            scans.append(acc + np.float32(i))
        assert all(s.shape == scans[0].shape for s in scans), "ragged"
        stacked = np.stack(scans) if scans else np.zeros((0, 0, 4), np.float32)
        return [("final", acc), ("scans", stacked.astype(np.float32))]
    return make_model(graph, 17), reference


def build_loop_tensor_split():
    """torch.tensor_split as torchvision's MViT exports it: a Loop with a constant trip
    count appends slices of x to a list, one more slice is appended after it, and the
    pieces are read back by SequenceAt at constant positions, SequenceLength and a
    ConcatFromSequence. The list's length is known at load, so the loader unrolls the
    loop and the sequence ops become plain nodes."""
    body = helper.make_graph(
        [helper.make_node("Gather", ["starts", "i"], ["lo"], name="lo", axis=0),
         helper.make_node("Add", ["i", "one"], ["i1"], name="next"),
         helper.make_node("Gather", ["starts", "i1"], ["hi"], name="hi", axis=0),
         helper.make_node("Unsqueeze", ["lo", "axes0"], ["lo1"], name="lo1"),
         helper.make_node("Unsqueeze", ["hi", "axes0"], ["hi1"], name="hi1"),
         helper.make_node("Slice", ["x", "lo1", "hi1", "axes1"], ["piece"], name="piece"),
         helper.make_node("SequenceInsert", ["s_in", "piece"], ["s_out"], name="append"),
         helper.make_node("Identity", ["true"], ["c_out"], name="keep_going")],
        "split_body",
        [value_info("i", INT64, []), value_info("cond", BOOL, []),
         seq_value_info("s_in", FLOAT, 2)],
        [value_info("c_out", BOOL, []), seq_value_info("s_out", FLOAT, 2)])
    nodes = [
        const_node("true", np.array(True)),
        helper.make_node("SequenceEmpty", [], ["s0"], name="empty", dtype=FLOAT),
        helper.make_node("Loop", ["two", "true", "s0"], ["s2"], name="split", body=body),
        helper.make_node("Slice", ["x", "start3", "end3", "axes1"], ["rest"], name="rest"),
        helper.make_node("SequenceInsert", ["s2", "rest"], ["s3"], name="append_rest"),
        helper.make_node("SequenceAt", ["s3", "zero"], ["first"], name="first"),
        helper.make_node("SequenceAt", ["s3", "minus_one"], ["last"], name="last"),
        helper.make_node("SequenceLength", ["s3"], ["pieces"], name="pieces"),
        helper.make_node("ConcatFromSequence", ["s3"], ["joined"], name="join", axis=1),
    ]
    graph = helper.make_graph(
        nodes, "loop_tensor_split", [value_info("x", FLOAT, ["batch", 6])],
        [value_info("first", FLOAT, ["batch", 1]), value_info("last", FLOAT, ["batch", None]),
         value_info("pieces", INT64, []), value_info("joined", FLOAT, ["batch", 6])],
        initializer=[init("two", np.array(2, np.int64)), init("one", np.array(1, np.int64)),
                     init("starts", np.array([0, 1, 3], np.int64)),
                     init("axes0", np.array([0], np.int64)), init("axes1", np.array([1], np.int64)),
                     init("start3", np.array([3], np.int64)), init("end3", np.array([6], np.int64)),
                     init("zero", np.array(0, np.int64)), init("minus_one", np.array(-1, np.int64))])

    def reference(x):
        return [("first", x[:, 0:1]), ("last", x[:, 3:6]), ("pieces", np.array(3, np.int64)),
                ("joined", x.copy())]
    return make_model(graph, 17), reference


def write_loop_models(w):
    base = "tests/fixtures/graphs"
    r = np.random.default_rng(114)

    model, ref = build_loop_scan()
    w.write_model(f"{base}/loop_scan/model.onnx", model)
    for batch in (1, 3, 5):
        x = r.standard_normal((batch, 4)).astype(np.float32)
        bias = r.standard_normal(4).astype(np.float32)
        write_graph_case(w, "loop_scan", f"batch{batch}", [("x", x), ("bias", bias)],
                         ref(x, bias))

    model, ref = build_loop_while()
    w.write_model(f"{base}/loop_while/model.onnx", model)
    # Doubling and halving are exact in binary, so sums cross the limit at known steps:
    # limit = total * 0.3: no doubling, two halvings (0.5, 0.25); * 1.5: one doubling, no
    # halving; * 20: five doublings (32).
    for case, rows, factor in (("zero_doublings", 2, 0.3), ("one_doubling", 3, 1.5),
                               ("five_doublings", 1, 20.0)):
        x = r.uniform(0.1, 1.0, (rows, 3)).astype(np.float32)
        limit = np.array(np.float32(x.astype(np.float64).sum() * factor), np.float32)
        write_graph_case(w, "loop_while", case, [("x", x), ("limit", limit)], ref(x, limit))

    model, ref = build_loop_growing()
    w.write_model(f"{base}/loop_growing/model.onnx", model)
    for n in (0, 1, 4):
        x = r.standard_normal((2, 4)).astype(np.float32)
        nv = np.array(n, np.int64)
        write_graph_case(w, "loop_growing", f"n{n}", [("x", x), ("n", nv)], ref(x, nv))

    model, ref = build_loop_sequence()
    w.write_model(f"{base}/loop_sequence/model.onnx", model)
    for steps in (1, 2, 5):
        x = r.standard_normal((steps, 2, 3)).astype(np.float32)
        write_graph_case(w, "loop_sequence", f"steps{steps}", [("x", x)], ref(x))

    model, ref = build_loop_sequence_reread()
    w.write_model(f"{base}/loop_sequence_reread/model.onnx", model)
    for steps in (1, 4):
        x = r.standard_normal((steps, 2, 4)).astype(np.float32)
        write_graph_case(w, "loop_sequence_reread", f"steps{steps}", [("x", x)], ref(x))

    model, ref = build_loop_ragged_scan()
    w.write_model(f"{base}/loop_ragged_scan/model.onnx", model)
    # No iteration: the scan output is [0, 0, 4], its unknown dim 0 (as onnxruntime has it).
    for case, n, grow in (("steady_n3", 3, False), ("grow_n1", 1, True), ("none_n0", 0, True)):
        x = r.standard_normal((2, 4)).astype(np.float32)
        nv, gv = np.array(n, np.int64), np.array(grow)
        write_graph_case(w, "loop_ragged_scan", case, [("x", x), ("n", nv), ("grow", gv)],
                         ref(x, nv, gv))

    model, ref = build_loop_tensor_split()
    w.write_model(f"{base}/loop_tensor_split/model.onnx", model)
    for batch in (1, 3):
        x = r.standard_normal((batch, 6)).astype(np.float32)
        write_graph_case(w, "loop_tensor_split", f"batch{batch}", [("x", x)], ref(x))

    # A body with one output too few (cond, one carried value, no scan output for the
    # node's second output), and a list read by SequenceAt (not a scan output).
    xv, yv = value_info("x", FLOAT, [2]), value_info("y", FLOAT, [2])
    short = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Neg", ["v_in"], ["v_out"])], "short",
        [value_info("i", INT64, []), value_info("c_in", BOOL, []), value_info("v_in", FLOAT, [2])],
        [value_info("c_out", BOOL, []), value_info("v_out", FLOAT, [2])])
    w.write_model("tests/fixtures/bad/loop_output_count.onnx", make_model(helper.make_graph(
        [helper.make_node("Loop", ["trips", "", "x"], ["y", "ys"], name="short_body",
                          body=short)],
        "loop_output_count", [xv], [yv, value_info("ys", FLOAT, [3, 2])],
        initializer=[init("trips", np.array(3, np.int64))]), 13))
    collect = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Mul", ["x", "x"], ["sq"], name="square"),
         helper.make_node("SequenceInsert", ["s_in", "sq"], ["s_out"], name="append")],
        "collect_body",
        [value_info("i", INT64, []), value_info("c_in", BOOL, []),
         seq_value_info("s_in", FLOAT, 1)],
        [value_info("c_out", BOOL, []), seq_value_info("s_out", FLOAT, 1)])
    w.write_model("tests/fixtures/bad/loop_sequence_at.onnx", make_model(helper.make_graph(
        [helper.make_node("SequenceEmpty", [], ["s0"], name="empty_list", dtype=FLOAT),
         helper.make_node("Loop", ["trips", "", "s0"], ["s"], name="collect", body=collect),
         helper.make_node("SequenceAt", ["s", "first"], ["y"], name="first_item")],
        "loop_sequence_at", [xv, value_info("trips", INT64, [])], [yv],
        initializer=[init("first", np.array(0, np.int64))]), 13))


def write_graph_models(w):
    r = np.random.default_rng(111)
    base = "tests/fixtures/graphs"
    model, ref = build_constants()
    w.write_model(f"{base}/constants/model.onnx", model)
    x = r.standard_normal((2, 3)).astype(np.float32)
    write_graph_case(w, "constants", "reference", [("x", x)], ref(x))

    model, ref = build_dropout_identity()
    w.write_model(f"{base}/dropout_identity/model.onnx", model)
    x = r.standard_normal((3, 4)).astype(np.float32)
    write_graph_case(w, "dropout_identity", "reference", [("x", x)], ref(x))

    model, ref = build_folding()
    w.write_model(f"{base}/folding/model.onnx", model)
    x = r.standard_normal((2, 4)).astype(np.float32)
    write_graph_case(w, "folding", "reference", [("x", x)], ref(x))

    model, ref = build_shape_reshape()
    w.write_model(f"{base}/shape_reshape/model.onnx", model)
    for batch, seq in ((2, 3), (1, 3), (2, 5), (3, 7)):
        x = r.standard_normal((batch, seq, DYN_DIM)).astype(np.float32)
        write_graph_case(w, "shape_reshape", f"batch{batch}_seq{seq}", [("x", x)], ref(x))

    w.write_model(f"{base}/value_dependent_shape/model.onnx", build_value_dependent_shape())
    for case, dims in (("to_3x2", [2, 1]), ("to_1x6", [0, 5])):
        x = r.standard_normal((2, 3)).astype(np.float32)
        d = np.array(dims, np.int64)
        write_graph_case(w, "value_dependent_shape", case, [("x", x), ("dims", d)],
                         [("y", x.reshape(d + 1))])

    model, ref = build_if_branches()
    w.write_model(f"{base}/if_branches/model.onnx", model)
    ri = np.random.default_rng(113)
    for case, batch, offset in (("then_batch3", 3, 1.5), ("then_batch1", 1, 1.5),
                                ("else_then_batch3", 3, -0.5), ("else_else_batch2", 2, -4.0),
                                ("else_else_batch1", 1, -4.0)):
        x = (ri.uniform(-0.4, 0.4, (batch, 4)) + offset).astype(np.float32)
        write_graph_case(w, "if_branches", case, [("x", x)], ref(x))

    # Graphs that refuse the warm-up's made-up dims (engine/predictor.h WarmUp): pairs of
    # values need an even length, so ones fail and the second try's 64 fits; a fixed
    # length of 5 fits neither, and the model must load anyway.
    rw = np.random.default_rng(112)
    for name, shape, length in (("warmup_even_length", [0, -1, 2], 6),
                                ("warmup_fixed_length", [0, 5], 5)):
        xv = value_info("x", TensorProto.FLOAT, ["batch", "length"])
        yv = value_info("y", TensorProto.FLOAT, None)
        w.write_model(f"{base}/{name}/model.onnx", make_model(helper.make_graph(
            [helper.make_node("Reshape", ["x", "shape"], ["y"], name="pairs")], name, [xv], [yv],
            initializer=[init("shape", np.array(shape, np.int64))]), 13))
        x = rw.standard_normal((3, length)).astype(np.float32)
        write_graph_case(w, name, "reference", [("x", x)],
                         [("y", x.reshape([3] + [d if d else 3 for d in shape[1:]]))])

    # Constant kinds that cannot be served, and a Dropout whose mask is used.
    xv, yv = value_info("x", TensorProto.FLOAT, [2]), value_info("y", TensorProto.FLOAT, [2])
    sparse = helper.make_sparse_tensor(
        helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0]),
        helper.make_tensor("i", TensorProto.INT64, [1], [0]), [2])
    w.write_model("tests/fixtures/bad/constant_sparse.onnx", make_model(helper.make_graph(
        [helper.make_node("Constant", [], ["c"], name="sparse_c", sparse_value=sparse),
         helper.make_node("Add", ["x", "c"], ["y"])], "constant_sparse", [xv], [yv]), 13))
    w.write_model("tests/fixtures/bad/constant_string.onnx", make_model(helper.make_graph(
        [helper.make_node("Constant", [], ["c"], name="string_c", value_string="hello"),
         helper.make_node("Identity", ["x"], ["y"])], "constant_string", [xv], [yv]), 13))
    # An If whose branch has one output too many, and a Loop named 'repeat' (three Negs:
    # y = -x), refused before Loop was served and kept as the smallest Loop that loads
    # (tests/unit/engine/loop_test.cc).
    one = helper.make_graph([helper.make_node("Neg", ["x"], ["a"])], "one", [],
                            [value_info("a", TensorProto.FLOAT, [2])])
    two = helper.make_graph([helper.make_node("Neg", ["x"], ["b"]),
                             helper.make_node("Abs", ["x"], ["c"])], "two", [],
                            [value_info("b", TensorProto.FLOAT, [2]),
                             value_info("c", TensorProto.FLOAT, [2])])
    cv = value_info("cond", TensorProto.BOOL, [])
    w.write_model("tests/fixtures/bad/if_output_count.onnx", make_model(helper.make_graph(
        [helper.make_node("If", ["cond"], ["y"], name="uneven", then_branch=one,
                          else_branch=two)], "if_output_count", [xv, cv], [yv]), 13))
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Neg", ["v_in"], ["v_out"])], "body",
        [value_info("i", TensorProto.INT64, []), value_info("c_in", TensorProto.BOOL, []),
         value_info("v_in", TensorProto.FLOAT, [2])],
        [value_info("c_out", TensorProto.BOOL, []), value_info("v_out", TensorProto.FLOAT, [2])])
    w.write_model("tests/fixtures/bad/loop.onnx", make_model(helper.make_graph(
        [helper.make_node("Loop", ["trips", "", "x"], ["y"], name="repeat", body=body)],
        "loop", [xv], [yv], initializer=[init("trips", np.array(3, np.int64))]), 13))
    w.write_model("tests/fixtures/bad/dropout_mask.onnx", make_model(helper.make_graph(
        [helper.make_node("Dropout", ["x"], ["y", "mask"], name="drop")], "dropout_mask", [xv],
        [yv, value_info("mask", TensorProto.BOOL, [2])]), 13))
    write_loop_models(w)


# ---------------------------------------------------------------------------------------
# Bad models for loader tests


def write_bad_models(w):
    base = "tests/fixtures/bad"
    x = value_info("x", TensorProto.FLOAT, ["batch", 4])
    y = value_info("y", TensorProto.FLOAT, ["batch", 4])
    w4 = init("w", np.arange(16, dtype=np.float32).reshape(4, 4))

    good = make_model(helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "good",
                                        [x], [y], initializer=[w4]), 13)
    data = good.SerializeToString(deterministic=True)
    # Cut inside the initializer's raw bytes so the parse fails, not just a short graph.
    w.write(f"{base}/truncated.onnx", data[:len(data) * 2 // 3])

    w.write_model(f"{base}/unknown_op.onnx", make_model(
        helper.make_graph([helper.make_node("Hardmax", ["x"], ["y"], axis=-1)], "unknown_op",
                          [x], [y]), 13))
    w.write_model(f"{base}/custom_domain_op.onnx", make_model(
        helper.make_graph([helper.make_node("FancyRelu", ["x"], ["y"], domain="com.example")],
                          "custom_domain_op", [x], [y]), 13, domains=["com.example"]))

    bad_init = TensorProto()
    bad_init.name = "w"
    bad_init.data_type = TensorProto.FLOAT
    bad_init.dims.extend([4, 4])
    bad_init.raw_data = b"\0" * 10  # 4x4 FP32 needs 64 bytes
    w.write_model(f"{base}/bad_initializer.onnx", make_model(
        helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "bad_initializer",
                          [x], [y], initializer=[bad_init]), 13))

    bad_attr = TensorProto()
    bad_attr.data_type = TensorProto.FLOAT
    bad_attr.dims.extend([1])
    bad_attr.float_data.extend([1.0, 2.0])  # FP32[1] holds one value
    w.write_model(f"{base}/bad_tensor_attribute.onnx", make_model(
        helper.make_graph([helper.make_node("Relu", ["x"], ["y"], value=bad_attr)],
                          "bad_tensor_attribute", [x], [y]), 13))

    w.write_model(f"{base}/missing_input.onnx", make_model(
        helper.make_graph([helper.make_node("Add", ["x", "ghost"], ["y"])], "missing_input",
                          [x], [y]), 13))

    w.write_model(f"{base}/bad_opset.onnx", make_model(
        helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "bad_opset", [x], [y]), 9))


# ---------------------------------------------------------------------------------------
# --verify: a tiny numpy interpreter of the supported ops, run over every written model,
# so a mis-wired graph cannot silently disagree with its hand-written reference.


def _attrs(node):
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def run_graph(model, feeds):
    env = dict(feeds)
    for t in model.graph.initializer:
        env[t.name] = numpy_helper.to_array(t)
    for node in model.graph.node:
        a = _attrs(node)
        x = [env[n] if n else None for n in node.input]
        op = node.op_type
        if op == "Gemm":
            c = x[2] if len(x) > 2 else None
            y = gemm(x[0], x[1], c, a.get("alpha", 1.0), a.get("beta", 1.0), a.get("transA", 0),
                     a.get("transB", 0))
        elif op == "MatMul":
            y = matmul(x[0], x[1])
        elif op in ("Add", "Sub", "Mul", "Div"):
            fn = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}.get(op)
            if fn is None:
                y = (x[0] / x[1]) if x[0].dtype.kind == "f" else np.trunc(x[0] / x[1])
            else:
                y = fn(x[0], x[1])
            y = y.astype(x[0].dtype)
        elif op == "Relu":
            y = relu(x[0])
        elif op == "Sigmoid":
            y = sigmoid(x[0])
        elif op == "Tanh":
            y = np.tanh(x[0])
        elif op == "Erf":
            y = erf(x[0]).astype(np.float32)
        elif op == "Softmax":
            y = softmax(x[0], a.get("axis", -1))
        elif op == "LayerNormalization":
            outs = layernorm(x[0], x[1], x[2] if len(x) > 2 else None, a.get("axis", -1),
                             a.get("epsilon", 1e-5))
            for name, v in zip(node.output, outs):
                env[name] = v
            continue
        elif op == "Gather":
            y = np.take(x[0], x[1], axis=a.get("axis", 0))
        elif op in ("ReduceSum", "ReduceMean"):
            axes = a.get("axes") if op == "ReduceMean" else (
                list(x[1]) if len(x) > 1 else None)
            if not axes and a.get("noop_with_empty_axes", 0):
                y = x[0]
            else:
                fn = np.sum if op == "ReduceSum" else np.mean
                y = fn(x[0].astype(np.float64), axis=tuple(axes) if axes else None,
                       keepdims=bool(a.get("keepdims", 1))).astype(np.float32)
        elif op == "Concat":
            y = np.concatenate(x, axis=a["axis"])
        elif op == "Reshape":
            y = reshape_ref(x[0], list(x[1]))
        elif op == "Flatten":
            ax = a.get("axis", 1)
            ax = ax + x[0].ndim if ax < 0 else ax
            y = x[0].reshape(int(np.prod(x[0].shape[:ax])), -1)
        elif op == "Transpose":
            y = np.transpose(x[0], a.get("perm"))
        elif op == "Unsqueeze":
            y = x[0]
            rank = x[0].ndim + len(x[1])
            for ax in sorted(int(v) % rank for v in x[1]):
                y = np.expand_dims(y, ax)
        elif op == "Squeeze":
            y = np.squeeze(x[0], axis=tuple(int(v) for v in x[1]) if len(x) > 1 else None)
        elif op in ("Identity", "Dropout"):
            y = x[0].copy()
        elif op == "Constant":
            attr = node.attribute[0]
            y = np.array(helper.get_attribute_value(attr))
            if attr.name == "value":
                y = numpy_helper.to_array(attr.t)
            elif attr.name in ("value_float", "value_floats"):
                y = y.astype(np.float32)
            else:
                y = y.astype(np.int64)
        elif op == "Shape":
            y = np.array(x[0].shape, np.int64)
            if a.get("start", 0) or "end" in a:
                rank = x[0].ndim
                s0, e0 = [min(max(v + rank if v < 0 else v, 0), rank)
                          for v in (a.get("start", 0), a.get("end", rank))]
                y = y[s0:max(s0, e0)]
        elif op == "Size":
            y = np.array(x[0].size, np.int64)
        elif op == "Cast":
            to = {v: k for k, v in NP_TO_ONNX.items()}[a["to"]]
            y = x[0].astype(to)
        else:
            raise ValueError(f"verify: unsupported op {op}")
        env[node.output[0]] = y
    return [env[o.name] for o in model.graph.output]


def verify(root):
    """Re-reads every op fixture and model reference and checks the graph reproduces it."""
    import glob
    checked = 0
    for case in sorted(glob.glob(os.path.join(root, "tests/fixtures/**/case.txt"), recursive=True)):
        d = os.path.dirname(case)
        feeds, want, model_path, tol = {}, [], None, (0.0, 0.0)
        for line in open(case):
            w = line.split()
            if not w or w[0].startswith("#"):
                continue
            if w[0] == "model":
                model_path = os.path.normpath(os.path.join(d, w[1]))
            elif w[0] == "tolerance":
                tol = (float(w[1]), float(w[2]))
            elif w[0] in ("input", "output"):
                dt = {v: k for k, v in NP_TO_NAME.items()}[w[2]]
                shape = [int(v) for v in w[3][1:-1].split(",") if v]
                raw = open(os.path.join(d, w[4]), "rb").read()
                arr = np.frombuffer(raw, dtype=np.uint8 if dt == np.bool_ else dt)
                arr = (arr != 0 if dt == np.bool_ else arr).reshape(shape)
                (feeds.__setitem__(w[1], arr) if w[0] == "input" else want.append(arr))
        got = run_graph(onnx.load(model_path), feeds)
        for g, w in zip(got, want):
            g = np.asarray(g)
            ok = g.shape == w.shape and g.dtype == w.dtype and (
                np.array_equal(g, w) if w.dtype.kind in "biu" else
                np.allclose(g.astype(np.float64), w.astype(np.float64), atol=tol[0] or 1e-7,
                            rtol=tol[1] or 1e-6, equal_nan=True))
            if not ok:
                raise SystemExit(f"verify: {case} disagrees with its model")
        checked += 1
    print(f"gen_models: verified {checked} cases against their models")


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), help="root to write under (default: the repository)")
    parser.add_argument("--only", choices=["examples", "fixtures"],
                        help="write only the example models or only the test fixtures")
    parser.add_argument("--verify", action="store_true",
                        help="after writing, run every model through a numpy interpreter and "
                        "compare with the stored references")
    args = parser.parse_args(argv)
    w = Writer(args.out)
    # Cast fixtures overflow to inf on purpose (FP32 -> FP16 of -70000).
    np.seterr(over="ignore")
    sizes = write_models(w, args.only)
    n_ops = 0
    if args.only in (None, "fixtures"):
        n_ops = write_op_fixtures(w)
        write_bad_models(w)
        write_graph_models(w)
    detail = ", ".join(f"{k} {v / 1e6:.2f} MB" for k, v in sizes.items())
    print(f"gen_models: {w.written} files written, {w.unchanged} unchanged; "
          f"{n_ops} op cases; models: {detail}")
    if args.verify:
        verify(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
