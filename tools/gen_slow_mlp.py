#!/usr/bin/python3
"""Writes "slow_mlp": a model whose run costs milliseconds, for overload runs.

    /usr/bin/python3 tools/gen_slow_mlp.py --out REPO [--hidden 2048] [--layers 3]
        [--max_queue_size 16] [--timeout_us 0]

Writes REPO/slow_mlp/{config.pbtxt,1/model.onnx}: input FP32 [batch,1024] -> (Gemm,
Relu) x layers, hidden units wide -> Gemm -> scores FP32 [batch,16]. With the default
sizes one row reads about 40 MB of weights, a few milliseconds on one core, so the model,
not the client or the transport, is what saturates under overload (scripts/overload-bench.sh,
tests/python/test_overload_burst.py). The config has one instance, max_batch_size 1 (no
merging, so capacity does not grow with the queue) and dynamic batching with the queue
policy given: a full queue refuses with UNAVAILABLE, a timeout drops queued requests.
The weights come from a fixed seed; the file is the same on every run.
"""

import argparse
import math
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

INPUTS = 1024
OUTPUTS = 16


def build(hidden, layers):
    rng = np.random.default_rng(12)
    sizes = [INPUTS] + [hidden] * layers + [OUTPUTS]
    nodes, inits = [], []
    x = "input"
    for i in range(len(sizes) - 1):
        fan_in, fan_out = sizes[i], sizes[i + 1]
        w = (rng.standard_normal((fan_in, fan_out), dtype=np.float32)
             * np.float32(math.sqrt(2.0 / fan_in)))
        b = np.zeros((fan_out,), dtype=np.float32)
        inits += [numpy_helper.from_array(w, f"fc{i}.weight"),
                  numpy_helper.from_array(b, f"fc{i}.bias")]
        y = f"fc{i}" if i < len(sizes) - 2 else "scores"
        nodes.append(helper.make_node("Gemm", [x, f"fc{i}.weight", f"fc{i}.bias"], [y],
                                      name=f"fc{i}"))
        x = y
        if i < len(sizes) - 2:
            nodes.append(helper.make_node("Relu", [x], [f"relu{i}"], name=f"relu{i}"))
            x = f"relu{i}"
    graph = helper.make_graph(
        nodes, "slow_mlp",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", INPUTS])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["batch", OUTPUTS])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="ndserve-gen_slow_mlp")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


CONFIG = """\
name: "slow_mlp"
max_batch_size: 1
input [ {{ name: "input" data_type: TYPE_FP32 dims: [ {inputs} ] }} ]
output [ {{ name: "scores" data_type: TYPE_FP32 dims: [ {outputs} ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
dynamic_batching {{
  default_queue_policy {{ max_queue_size: {max_queue_size} default_timeout_microseconds: {timeout_us} }}
}}
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="model repository to write into")
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--max_queue_size", type=int, default=16)
    parser.add_argument("--timeout_us", type=int, default=0)
    args = parser.parse_args()
    root = os.path.join(args.out, "slow_mlp")
    os.makedirs(os.path.join(root, "1"), exist_ok=True)
    with open(os.path.join(root, "1", "model.onnx"), "wb") as f:
        f.write(build(args.hidden, args.layers).SerializeToString(deterministic=True))
    with open(os.path.join(root, "config.pbtxt"), "w") as f:
        f.write(CONFIG.format(inputs=INPUTS, outputs=OUTPUTS, max_queue_size=args.max_queue_size,
                              timeout_us=args.timeout_us))


if __name__ == "__main__":
    main()
