"""ndserved's shutdown promises, through the real binary: the exit timeout cuts requests
still computing (clients get UNAVAILABLE, the log counts them), a connected but idle
client channel does not hold the exit, and SIGTERM while the models are still loading
is logged and ends in a clean exit.

The slow models are chains of MatMul nodes written here with Debian's onnx: a request
(or a warm-up) takes far longer than the test waits, and the engine stops it between two
nodes. Exit times are bounded loosely (an integration property, not a benchmark).

Needs NDSERVED (the binary) and NDSERVE_PROTO_PYTHON_DIR; ctest sets both.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.request

import grpc
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from ndserve_grpc import UNLIMITED, free_port, health_pb2, health_pb2_grpc, inference_pb2, \
    inference_pb2_grpc

SERVING = health_pb2.HealthCheckResponse.SERVING
WIDTH = 256


def write_chain_model(repo, name, rows, nodes):
    """<repo>/<name>/1/model.onnx: y = x @ W @ W ... (`nodes` MatMuls), x of [rows, 256]
    (rows None: any). W averages, so values stay finite however long the chain."""
    w = numpy_helper.from_array(np.full((WIDTH, WIDTH), 1.0 / WIDTH, np.float32), "w")
    chain = []
    for i in range(nodes):
        out = "y" if i == nodes - 1 else f"h{i}"
        chain.append(helper.make_node("MatMul", ["x" if i == 0 else f"h{i - 1}", "w"], [out],
                                      name=f"mm{i}"))
    dim = rows if rows is not None else "rows"
    graph = helper.make_graph(
        chain, name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [dim, WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [dim, WIDTH])],
        initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    os.makedirs(os.path.join(repo, name, "1"))
    with open(os.path.join(repo, name, "1", "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())


class Daemon:
    """One ndserved on free loopback ports, serving `repo`, its log in a file."""

    def __init__(self, repo, *flags):
        self.grpc_port, self.metrics_port, self.admin_port = free_port(), free_port(), free_port()
        self.log_file = tempfile.NamedTemporaryFile("w+", prefix="ndserved-", suffix=".log")
        args = [os.environ["NDSERVED"], f"--grpc_address=127.0.0.1:{self.grpc_port}",
                "--http_address=",
                f"--metrics_address=127.0.0.1:{self.metrics_port}",
                f"--admin_address=127.0.0.1:{self.admin_port}", f"--model_repository={repo}",
                "--device=cpu", *flags]
        env = {k: v for k, v in os.environ.items() if not k.startswith("NDSERVE_MEMORY")}
        self.proc = subprocess.Popen(args, stdout=self.log_file, stderr=subprocess.STDOUT,
                                     env=env)

    def log(self):
        with open(self.log_file.name) as f:
            return f.read()

    def wait_listening(self, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError("ndserved exited: " + self.log())
            try:
                socket.create_connection(("127.0.0.1", self.grpc_port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError("ndserved did not listen: " + self.log())

    def wait_ready(self, timeout=120):
        self.wait_listening()
        channel = grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}")
        try:
            stub = health_pb2_grpc.HealthStub(channel)
            deadline = time.time() + timeout
            while time.time() < deadline:
                try:
                    if stub.Check(health_pb2.HealthCheckRequest(service="readiness"),
                                  timeout=1).status == SERVING:
                        return
                except grpc.RpcError:
                    pass
                time.sleep(0.1)
        finally:
            channel.close()
        raise AssertionError("ndserved did not become ready: " + self.log())

    def metric_sum(self, family):
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                      timeout=10).read().decode()
        return sum(float(m) for m in re.findall(rf"^{family}(?:{{[^}}]*}})? (\S+)$", text,
                                                 re.MULTILINE))

    def terminate_and_time(self, timeout=60):
        """SIGTERM; (exit status, seconds until the process was gone)."""
        start = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=timeout)
        return code, time.monotonic() - start

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log_file.close()


class ShutdownTest(unittest.TestCase):
    def setUp(self):
        self.repo = tempfile.mkdtemp(prefix="ndserve-shutdown-")

    def tearDown(self):
        shutil.rmtree(self.repo, ignore_errors=True)

    def test_exit_timeout_cuts_requests_still_computing(self):
        # 4000 nodes of 4096x256 @ 256x256: minutes of work per request, ~10-100 ms per node.
        write_chain_model(self.repo, "slow", None, 4000)
        daemon = Daemon(self.repo, "--exit_timeout_seconds=1")
        try:
            daemon.wait_ready()
            channel = grpc.insecure_channel(f"127.0.0.1:{daemon.grpc_port}", options=UNLIMITED)
            stub = inference_pb2_grpc.GRPCInferenceServiceStub(channel)
            request = inference_pb2.ModelInferRequest(model_name="slow")
            request.inputs.add(name="x", datatype="FP32", shape=[4096, WIDTH])
            request.raw_input_contents.append(np.ones((4096, WIDTH), np.float32).tobytes())
            outcomes = []

            def call():
                try:
                    stub.ModelInfer(request, timeout=120)
                    outcomes.append((grpc.StatusCode.OK, ""))
                except grpc.RpcError as e:
                    outcomes.append((e.code(), e.details()))

            clients = [threading.Thread(target=call) for _ in range(4)]
            for t in clients:
                t.start()
            # One request computing; then time for the others to be accepted (they queue
            # behind it, for a worker or for the model's one predictor).
            deadline = time.time() + 60
            while daemon.metric_sum("ndserve_inference_inflight") < 1:
                self.assertLess(time.time(), deadline, "no request in flight")
                time.sleep(0.05)
            time.sleep(1)
            code, seconds = daemon.terminate_and_time()
            for t in clients:
                t.join(timeout=60)
            log = daemon.log()
            self.assertEqual(code, 0, log)
            # 1 s of exit timeout, then the cut; the bound is loose on purpose.
            self.assertLess(seconds, 5, log)
            self.assertEqual(len(outcomes), 4)
            for status, details in outcomes:
                self.assertEqual(status, grpc.StatusCode.UNAVAILABLE, details)
                self.assertIn("exit timeout", details)
            self.assertRegex(log, r"exit timeout \(1 s\) reached with [1-4] calls? unanswered")
            self.assertIn("4 inference requests were cut by the exit timeout", log)
            self.assertIn("final pool status on cpu:0: 0 B allocated", log)
            channel.close()
        finally:
            daemon.kill()

    def test_idle_channel_does_not_delay_exit(self):
        daemon = Daemon(self.repo, "--exit_timeout_seconds=30")
        try:
            daemon.wait_ready()
            # Connected by one call, then left open and idle: Python's channel reacts to a
            # GOAWAY only every few seconds, and the drain used to wait for it.
            channel = grpc.insecure_channel(f"127.0.0.1:{daemon.grpc_port}")
            stub = inference_pb2_grpc.GRPCInferenceServiceStub(channel)
            self.assertTrue(stub.ServerLive(inference_pb2.ServerLiveRequest(), timeout=10).live)
            code, seconds = daemon.terminate_and_time()
            self.assertEqual(code, 0, daemon.log())
            self.assertLess(seconds, 3, daemon.log())
            channel.close()
        finally:
            daemon.kill()

    def test_sigterm_during_startup_logs_and_exits_cleanly(self):
        # A warm-up of 4096 rows through 4000 nodes: the load is still running when the
        # signal comes.
        write_chain_model(self.repo, "slowload", 4096, 4000)
        daemon = Daemon(self.repo, "--exit_timeout_seconds=30")
        try:
            daemon.wait_listening()
            time.sleep(0.5)
            code, seconds = daemon.terminate_and_time()
            log = daemon.log()
            self.assertEqual(code, 0, log)
            self.assertIn("received Terminated during start-up", log)
            self.assertNotIn("] ready", log)
            self.assertIn("stopped", log)
            self.assertIn("final pool status on cpu:0: 0 B allocated", log)
            self.assertLess(seconds, 10, log)
        finally:
            daemon.kill()


if __name__ == "__main__":
    unittest.main()
