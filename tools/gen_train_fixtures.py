#!/usr/bin/python3
"""PyTorch reference runs for the autograd parity tests (tests/train/).

For each model (an MLP, an embedding-bag model, an LSTM cell with truncated BPTT) and each
optimizer (plain SGD, SGD with Nesterov momentum and weight decay, Adam) writes, under
--out/<model>_<optimizer>/:
  manifest.txt   one line per tensor: <name> <f32|i64> <dims...>
  <name>.bin     its bytes, little-endian, C order
with the initial parameters (init.<param>), the batches (batch<k>.<input>), the
parameters after step 1 and after step 5 (step1.<param>, step5.<param>) and the five
losses (losses). Nothing here is committed; CMake runs it at build time.
"""
import argparse
import os

import numpy as np
import torch
import torch.nn.functional as F

STEPS = 5
OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.1),
    "momentum": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True,
                                          weight_decay=0.01),
    "adam": lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.9, 0.999), eps=1e-8,
                                       weight_decay=0.001),
}


class Writer:
    def __init__(self, folder):
        self.folder = folder
        self.lines = []
        os.makedirs(folder, exist_ok=True)

    def put(self, name, tensor):
        a = tensor.detach().cpu().numpy() if torch.is_tensor(tensor) else np.asarray(tensor)
        kind = "i64" if a.dtype == np.int64 else "f32"
        a = np.ascontiguousarray(a.astype(np.int64 if kind == "i64" else np.float32))
        with open(os.path.join(self.folder, name + ".bin"), "wb") as f:
            f.write(a.tobytes())
        self.lines.append(" ".join([name, kind] + [str(d) for d in a.shape]))

    def close(self):
        with open(os.path.join(self.folder, "manifest.txt"), "w") as f:
            f.write("\n".join(self.lines) + "\n")


def mlp(gen):
    params = {
        "fc0.weight": torch.randn(32, 16, generator=gen) * 0.3,
        "fc0.bias": torch.randn(32, generator=gen) * 0.1,
        "fc1.weight": torch.randn(10, 32, generator=gen) * 0.3,
        "fc1.bias": torch.randn(10, generator=gen) * 0.1,
    }
    batches = [{"x": torch.randn(8, 16, generator=gen),
                "labels": torch.randint(0, 10, (8,), generator=gen)} for _ in range(STEPS)]

    def loss(p, b, state):
        h = torch.relu(b["x"] @ p["fc0.weight"].T + p["fc0.bias"])
        logits = h @ p["fc1.weight"].T + p["fc1.bias"]
        return F.cross_entropy(logits, b["labels"]), state

    return params, batches, loss


def embedding(gen):
    params = {
        "emb.table": torch.randn(50, 8, generator=gen) * 0.5,
        "fc0.weight": torch.randn(6, 11, generator=gen) * 0.3,
        "fc0.bias": torch.randn(6, generator=gen) * 0.1,
        "fc1.weight": torch.randn(1, 6, generator=gen) * 0.3,
        "fc1.bias": torch.randn(1, generator=gen) * 0.1,
    }
    batches = [{"ids": torch.randint(0, 50, (8, 4), generator=gen),
                "dense": torch.randn(8, 3, generator=gen),
                "targets": torch.randint(0, 2, (8, 1), generator=gen).float()}
               for _ in range(STEPS)]

    def loss(p, b, state):
        bag = p["emb.table"][b["ids"]].mean(dim=1)
        h = torch.tanh(torch.cat([bag, b["dense"]], dim=1) @ p["fc0.weight"].T + p["fc0.bias"])
        logits = h @ p["fc1.weight"].T + p["fc1.bias"]
        return F.binary_cross_entropy_with_logits(logits, b["targets"]), state

    return params, batches, loss


LSTM_IN, LSTM_HIDDEN, LSTM_BATCH, BPTT = 3, 5, 4, 2


def recurrent(gen):
    h4 = 4 * LSTM_HIDDEN
    params = {
        "w_ih": torch.randn(h4, LSTM_IN, generator=gen) * 0.4,
        "w_hh": torch.randn(h4, LSTM_HIDDEN, generator=gen) * 0.4,
        "b_ih": torch.randn(h4, generator=gen) * 0.1,
        "b_hh": torch.randn(h4, generator=gen) * 0.1,
        "head.weight": torch.randn(1, LSTM_HIDDEN, generator=gen) * 0.4,
        "head.bias": torch.randn(1, generator=gen) * 0.1,
    }
    # One sequence cut into STEPS chunks of BPTT time steps; each chunk is a step.
    batches = [{"x": torch.randn(BPTT, LSTM_BATCH, LSTM_IN, generator=gen),
                "y": torch.randn(BPTT, LSTM_BATCH, 1, generator=gen)} for _ in range(STEPS)]

    def loss(p, b, state):
        h, c = state if state is not None else (torch.zeros(LSTM_BATCH, LSTM_HIDDEN),
                                                torch.zeros(LSTM_BATCH, LSTM_HIDDEN))
        preds = []
        for t in range(BPTT):
            gates = b["x"][t] @ p["w_ih"].T + p["b_ih"] + h @ p["w_hh"].T + p["b_hh"]
            i, f, g, o = gates.chunk(4, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            preds.append(h @ p["head.weight"].T + p["head.bias"])
        value = F.mse_loss(torch.cat(preds, dim=0), b["y"].reshape(-1, 1))
        # Truncated BPTT: the state goes on, its history does not.
        return value, (h.detach(), c.detach())

    return params, batches, loss


MODELS = {"mlp": mlp, "embedding": embedding, "recurrent": recurrent}


def lstm_onnx_layout(p):
    """The recurrent model's LSTM weights as ONNX LSTM wants them: gates i, o, f, c
    (PyTorch's are i, f, g, o), W [1, 4H, I], R [1, 4H, H], B [1, 8H] (Wb then Rb)."""
    def reorder(t):
        i, f, g, o = t.detach().chunk(4, dim=0)
        return torch.cat([i, o, f, g], dim=0)
    return {
        "W": reorder(p["w_ih"]).unsqueeze(0),
        "R": reorder(p["w_hh"]).unsqueeze(0),
        "B": torch.cat([reorder(p["b_ih"]), reorder(p["b_hh"])]).unsqueeze(0),
        "head.weight": p["head.weight"].detach(),
        "head.bias": p["head.bias"].detach(),
    }


def write_recurrent_onnx(params, path):
    """The recurrent model as an ONNX graph a served model could be: an LSTM whose
    initial state is the inputs h0/c0 and whose final state is the outputs h_n/c_n, and
    a Gemm head on every time step (pred [T*B, 1], t-major like the reference)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    inits = [numpy_helper.from_array(v.numpy().astype(np.float32), name)
             for name, v in lstm_onnx_layout(params).items()]
    inits.append(numpy_helper.from_array(np.array([-1, LSTM_HIDDEN], np.int64), "flat"))
    nodes = [
        helper.make_node("LSTM", ["x", "W", "R", "B", "", "h0", "c0"], ["y", "h_n", "c_n"],
                         hidden_size=LSTM_HIDDEN),
        helper.make_node("Reshape", ["y", "flat"], ["y_flat"]),
        helper.make_node("Gemm", ["y_flat", "head.weight", "head.bias"], ["pred"], transB=1),
    ]
    state = [1, LSTM_BATCH, LSTM_HIDDEN]
    graph = helper.make_graph(
        nodes, "recurrent",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [BPTT, LSTM_BATCH, LSTM_IN]),
         helper.make_tensor_value_info("h0", TensorProto.FLOAT, state),
         helper.make_tensor_value_info("c0", TensorProto.FLOAT, state)],
        [helper.make_tensor_value_info("pred", TensorProto.FLOAT, [BPTT * LSTM_BATCH, 1]),
         helper.make_tensor_value_info("h_n", TensorProto.FLOAT, state),
         helper.make_tensor_value_info("c_n", TensorProto.FLOAT, state)],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


def run(model, opt_name, out):
    gen = torch.Generator().manual_seed(1234)
    params, batches, loss_fn = MODELS[model](gen)
    w = Writer(os.path.join(out, f"{model}_{opt_name}"))
    for name, value in params.items():
        w.put("init." + name, value)
    for k, batch in enumerate(batches):
        for name, value in batch.items():
            w.put(f"batch{k}.{name}", value)
    if model == "recurrent":
        # The same run seen through a served ONNX LSTM (truncated BPTT via the Trainer
        # service's TrainingRun): its weights in ONNX layout, as onnx.<name>.
        write_recurrent_onnx(params, os.path.join(w.folder, "model.onnx"))
    p = {name: value.clone().requires_grad_(True) for name, value in params.items()}
    optimizer = OPTIMIZERS[opt_name](list(p.values()))
    state = None
    losses = []
    for k in range(STEPS):
        optimizer.zero_grad()
        value, state = loss_fn(p, batches[k], state)
        value.backward()
        optimizer.step()
        losses.append(value.item())
        if k + 1 in (1, STEPS):
            for name, value in p.items():
                w.put(f"step{k + 1}.{name}", value)
            if model == "recurrent":
                for name, value in lstm_onnx_layout(p).items():
                    w.put(f"step{k + 1}.onnx.{name}", value)
    w.put("losses", np.array(losses, np.float32))
    w.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    for model in MODELS:
        for opt_name in OPTIMIZERS:
            run(model, opt_name, args.out)
    with open(os.path.join(args.out, "DONE"), "w") as f:
        f.write("ok\n")


if __name__ == "__main__":
    main()
