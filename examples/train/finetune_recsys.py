#!/usr/bin/python3
"""Fine-tunes the served `recsys` example on click feedback while it serves
(docs/design.md §10.1, README "Training while serving").

Clicks are generated from a hidden per-id preference: every id of every feature has a
fixed random affinity, and a user clicks when the affinities of the ids in the request
sum above zero. The served model's random embeddings know nothing of that, so its
held-out AUC starts near 0.5; fine-tuning the embeddings and the MLP through the Trainer
service raises it. The script prints the AUC of the served version before training and
of the committed version after.

Either against a running daemon (its repository gets the new version):
    /usr/bin/python3 examples/train/finetune_recsys.py --server 127.0.0.1:8001 \
        --admin 127.0.0.1:8003 [--token_file FILE]
or on a daemon of its own over a temporary copy of examples/models/recsys:
    /usr/bin/python3 examples/train/finetune_recsys.py --ndserved build/server/ndserved

Needs Debian's python3-grpcio, python3-protobuf and python3-numpy, and the generated
stubs: NDSERVE_PROTO_PYTHON_DIR (default build/proto/python).
"""

import argparse
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.environ.get("NDSERVE_PROTO_PYTHON_DIR",
                                  os.path.join(ROOT, "build", "proto", "python")))
import grpc  # noqa: E402
import inference_pb2  # noqa: E402
import inference_pb2_grpc  # noqa: E402
import train_pb2  # noqa: E402
import train_pb2_grpc  # noqa: E402

FEATURES, BAG, DENSE = 4, 8, 13
UNLIMITED = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]


class Clicks:
    """Click feedback that depends on the ids: P(click) is a sharp sigmoid of the summed
    affinities of the request's ids."""

    def __init__(self, vocab, seed):
        rng = np.random.default_rng(seed)
        self.vocab = vocab
        self.affinity = rng.standard_normal((FEATURES, vocab)).astype(np.float32)
        self.rng = np.random.default_rng(seed + 1)

    def batch(self, rows):
        ids = self.rng.integers(0, self.vocab, size=(rows, FEATURES, BAG), dtype=np.int64)
        dense = self.rng.standard_normal((rows, DENSE)).astype(np.float32)
        score = sum(self.affinity[f][ids[:, f, :]].sum(axis=1) for f in range(FEATURES))
        p = 1.0 / (1.0 + np.exp(-2.0 * score))
        clicks = (self.rng.random(rows) < p).astype(np.float32).reshape(rows, 1)
        return ids, dense, clicks


def auc(labels, scores):
    """Area under the ROC curve (Mann-Whitney U over ranks, ties averaged)."""
    labels = labels.ravel() > 0.5
    order = np.argsort(scores.ravel(), kind="mergesort")
    ranks = np.empty(len(order))
    sorted_scores = scores.ravel()[order]
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and sorted_scores[j + 1] == sorted_scores[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2.0 + 1
        i = j + 1
    pos, neg = labels.sum(), (~labels).sum()
    return (ranks[labels].sum() - pos * (pos + 1) / 2.0) / (pos * neg)


def tensor(name, array, datatype):
    return train_pb2.Tensor(name=name, datatype=datatype, shape=list(array.shape),
                            raw=np.ascontiguousarray(array).tobytes())


def predict(stub, ids, dense, chunk=64):
    """The served model's scores (the config's max_batch_size is 64)."""
    scores = []
    for start in range(0, len(ids), chunk):
        request = inference_pb2.ModelInferRequest(model_name="recsys")
        for name, array, datatype in (("sparse_ids", ids[start:start + chunk], "INT64"),
                                      ("dense", dense[start:start + chunk], "FP32")):
            request.inputs.add(name=name, datatype=datatype, shape=list(array.shape))
            request.raw_input_contents.append(np.ascontiguousarray(array).tobytes())
        response = stub.ModelInfer(request, timeout=60)
        scores.append(np.frombuffer(response.raw_output_contents[0], dtype=np.float32))
        version = response.model_version
    return np.concatenate(scores), version


def free_port():
    """A loopback port that was free a moment ago, below the kernel's ephemeral range (a
    bind(0) port is an ephemeral one, which a client socket may take before the daemon
    binds it)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            floor = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        floor = 32768
    rng = random.SystemRandom()
    while True:
        port = rng.randrange(20000 if floor > 21000 else 1024, floor)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


def start_daemon(binary, workdir):
    repo = os.path.join(workdir, "repo")
    shutil.copytree(os.path.join(ROOT, "examples", "models", "recsys"),
                    os.path.join(repo, "recsys"))
    ports = [free_port() for _ in range(3)]
    proc = subprocess.Popen(
        [binary, f"--grpc_address=127.0.0.1:{ports[0]}",
         f"--metrics_address=127.0.0.1:{ports[1]}", f"--admin_address=127.0.0.1:{ports[2]}",
         "--http_address=", "--device=cpu", f"--model_repository={repo}"],
        stdout=open(os.path.join(workdir, "ndserved.log"), "w"), stderr=subprocess.STDOUT)
    return proc, f"127.0.0.1:{ports[0]}", f"127.0.0.1:{ports[2]}"


def wait_ready(stub, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if stub.ModelReady(inference_pb2.ModelReadyRequest(name="recsys"), timeout=2).ready:
                return
        except grpc.RpcError:
            pass
        time.sleep(0.2)
    raise SystemExit("the daemon did not get ready")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default="127.0.0.1:8001", help="inference address")
    parser.add_argument("--admin", default="127.0.0.1:8003", help="admin (Trainer) address")
    parser.add_argument("--token_file", default="", help="admin bearer token file")
    parser.add_argument("--ndserved", default="", help="start this daemon on a temp copy")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--vocab", type=int, default=200, help="ids per feature in the clicks")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--require_auc", type=float, default=0.0,
                        help="exit 1 when the committed version's AUC is below this (ctest)")
    args = parser.parse_args()

    proc, workdir = None, None
    if args.ndserved:
        workdir = tempfile.mkdtemp(prefix="ndserve_finetune_")
        proc, args.server, args.admin = start_daemon(args.ndserved, workdir)
    try:
        metadata = []
        if args.token_file:
            with open(args.token_file) as f:
                metadata = [("authorization", "Bearer " + f.read().strip())]
        infer = inference_pb2_grpc.GRPCInferenceServiceStub(
            grpc.insecure_channel(args.server, options=UNLIMITED))
        trainer = train_pb2_grpc.TrainerStub(grpc.insecure_channel(args.admin, options=UNLIMITED))
        wait_ready(infer)

        clicks = Clicks(args.vocab, args.seed)
        held_ids, held_dense, held_clicks = clicks.batch(4096)
        scores, version = predict(infer, held_ids, held_dense)
        print(f"version {version}: held-out AUC {auc(held_clicks, scores):.3f}", flush=True)

        started = trainer.StartSession(train_pb2.StartSessionRequest(
            model="recsys", loss="bce_with_logits", target_output="fc2", optimizer="adam",
            lr=args.lr), metadata=metadata, timeout=120)
        print(f"session {started.session_id} on version {started.version}: "
              f"{len(started.parameters)} parameters", flush=True)

        def batches():
            for step in range(args.steps):
                ids, dense, y = clicks.batch(args.batch)
                yield train_pb2.Batch(
                    session_id=started.session_id if step == 0 else "",
                    inputs=[tensor("sparse_ids", ids, "INT64"), tensor("dense", dense, "FP32")],
                    labels=tensor("labels", y, "FP32"))

        begin = time.time()
        for result in trainer.Train(batches(), metadata=metadata, timeout=3600):
            if result.step == 1 or result.step % 50 == 0 or result.step == args.steps:
                print(f"step {result.step}: loss {result.loss:.4f} grad_norm "
                      f"{result.grad_norm:.4f} batch_peak_bytes {result.batch_peak_bytes}",
                      flush=True)
        elapsed = time.time() - begin
        print(f"{args.steps} steps of batch {args.batch} in {elapsed:.1f} s "
              f"({args.steps / elapsed:.1f} steps/s)", flush=True)

        committed = trainer.Commit(train_pb2.CommitRequest(session_id=started.session_id),
                                   metadata=metadata, timeout=300)
        scores, version = predict(infer, held_ids, held_dense)
        after = auc(held_clicks, scores)
        print(f"committed version {committed.version}; version {version}: held-out AUC "
              f"{after:.3f}", flush=True)
        if version != str(committed.version) or after < args.require_auc:
            raise SystemExit(f"expected version {committed.version} with AUC >= "
                             f"{args.require_auc}")
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=120)
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
