"""The Trainer service (docs/design.md §10.1) against a running ndserved: a session on
`mlp` streams 20 batches and its loss falls, Commit makes the model serve version 2
with different outputs, Abort/ListSessions, unknown sessions are NOT_FOUND, bad input
INVALID_ARGUMENT, too many sessions RESOURCE_EXHAUSTED, idle sessions expire, the admin
token rule applies, the ndserve_train_* metrics count the steps, and inference on the
model never fails meanwhile.

Needs NDSERVED, NDSERVE_PROTO_PYTHON_DIR and NDSERVE_SOURCE_DIR; ctest sets them. Run
with Debian's /usr/bin/python3 (python3-grpcio, python3-protobuf, python3-numpy).
"""

import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.request

import grpc
import numpy as np

from ndserve_grpc import (UNLIMITED, inference_pb2, inference_pb2_grpc, start_daemon, train_pb2,
                          train_pb2_grpc)

SOURCE_DIR = os.environ.get(
    "NDSERVE_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
TOKEN = "trainer-test-token"
IDLE_SECONDS = 5


def tensor(name, array, datatype):
    return train_pb2.Tensor(name=name, datatype=datatype, shape=list(array.shape),
                            raw=np.ascontiguousarray(array).tobytes())


def mlp_batches(count, rows=32, seed=0):
    """Batches whose class is a fixed linear function of the input: learnable."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((64, 10)).astype(np.float32)
    for _ in range(count):
        x = rng.standard_normal((rows, 64)).astype(np.float32)
        y = np.argmax(x @ w, axis=1).astype(np.int64)
        yield x, y


def batch_message(session, x, y):
    return train_pb2.Batch(session_id=session, inputs=[tensor("input", x, "FP32")],
                           labels=tensor("labels", y, "INT64"))


class TrainerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ndserve_trainer_")
        repo = os.path.join(cls.tmp, "repo")
        shutil.copytree(os.path.join(SOURCE_DIR, "examples", "models", "mlp"),
                        os.path.join(repo, "mlp"))
        cls.repo = repo
        token_file = os.path.join(cls.tmp, "token")
        with open(token_file, "w") as f:
            f.write(TOKEN + "\n")
        os.chmod(token_file, 0o600)
        cls.token_file = token_file
        cls.daemon = start_daemon(
            [f"--model_repository={repo}", f"--admin_token_file={token_file}",
             f"--train_session_idle_seconds={IDLE_SECONDS}"], SOURCE_DIR)
        cls.grpc_port, cls.admin_port = cls.daemon.grpc_port, cls.daemon.admin_port
        cls.metrics_port = cls.daemon.metrics_port
        cls.channel = grpc.insecure_channel(f"127.0.0.1:{cls.grpc_port}", options=UNLIMITED)
        cls.infer = inference_pb2_grpc.GRPCInferenceServiceStub(cls.channel)
        cls.admin_channel = grpc.insecure_channel(f"127.0.0.1:{cls.admin_port}",
                                                  options=UNLIMITED)
        cls.trainer = train_pb2_grpc.TrainerStub(cls.admin_channel)
        cls.auth = [("authorization", f"Bearer {TOKEN}")]

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.admin_channel.close()
        code, log = cls.daemon.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)
        assert code == 0, log

    def setUp(self):
        # Every test leaves no session behind; start from none.
        for s in self.trainer.ListSessions(train_pb2.ListSessionsRequest(),
                                           metadata=self.auth).sessions:
            self.trainer.Abort(train_pb2.AbortRequest(session_id=s.session_id),
                               metadata=self.auth)

    def start(self, **kwargs):
        request = dict(model="mlp", loss="cross_entropy", target_output="fc2",
                       optimizer="momentum", lr=0.05)
        request.update(kwargs)
        return self.trainer.StartSession(train_pb2.StartSessionRequest(**request),
                                         metadata=self.auth, timeout=60)

    def predict(self, x):
        request = inference_pb2.ModelInferRequest(model_name="mlp")
        request.inputs.add(name="input", datatype="FP32", shape=list(x.shape))
        request.raw_input_contents.append(x.tobytes())
        response = self.infer.ModelInfer(request, timeout=60)
        out = np.frombuffer(response.raw_output_contents[0], dtype=np.float32)
        return response.model_version, out.reshape(response.outputs[0].shape)

    def assert_code(self, code, fn, text=None):
        with self.assertRaises(grpc.RpcError) as caught:
            fn()
        self.assertEqual(caught.exception.code(), code, caught.exception.details())
        if text is not None:
            self.assertIn(text, caught.exception.details())

    def test_a_session_trains_and_commits_while_the_model_serves(self):
        probe = np.random.default_rng(7).standard_normal((4, 64)).astype(np.float32)
        version, before = self.predict(probe)
        self.assertEqual(version, "1")
        # Clients keep asking the model throughout; none may fail.
        stop, failures, answers = threading.Event(), [], [0]

        def client():
            while not stop.is_set():
                try:
                    self.predict(probe)
                    answers[0] += 1
                except grpc.RpcError as e:
                    failures.append(e.details())
        clients = [threading.Thread(target=client) for _ in range(4)]
        for t in clients:
            t.start()
        try:
            started = self.start()
            self.assertEqual(started.version, 1)
            self.assertEqual(len(started.parameters), 6)
            session = started.session_id
            batches = list(mlp_batches(4))
            messages = [batch_message(session if i == 0 else "", *batches[i % 4])
                        for i in range(20)]
            results = list(self.trainer.Train(iter(messages), metadata=self.auth, timeout=300))
            self.assertEqual([r.step for r in results], list(range(1, 21)))
            losses = [r.loss for r in results]
            self.assertLess(np.mean(losses[-4:]), 0.8 * np.mean(losses[:4]), losses)
            self.assertTrue(all(r.grad_norm > 0 and r.batch_peak_bytes > 0 for r in results))
            # The stream's batches went through the eager batch iterator: the step's own
            # batch, and never more than two.
            self.assertTrue(all(1 <= r.batches_held <= 2 for r in results),
                            [r.batches_held for r in results])
            listed = self.trainer.ListSessions(train_pb2.ListSessionsRequest(),
                                               metadata=self.auth).sessions
            self.assertEqual([(s.session_id, s.model, s.version, s.steps) for s in listed],
                             [(session, "mlp", 1, 20)])
            self.assertGreater(listed[0].trainer_bytes, 0)

            committed = self.trainer.Commit(train_pb2.CommitRequest(session_id=session),
                                            metadata=self.auth, timeout=120)
            self.assertEqual((committed.version, committed.steps), (2, 20))
            self.assertTrue(os.path.isfile(os.path.join(self.repo, "mlp", "2", "model.onnx")))
            version, after = self.predict(probe)
            self.assertEqual(version, "2")
            self.assertGreater(np.max(np.abs(after - before)), 1e-4)
            # The commit ended the session.
            self.assertEqual(len(self.trainer.ListSessions(train_pb2.ListSessionsRequest(),
                                                           metadata=self.auth).sessions), 0)
            time.sleep(0.5)
        finally:
            stop.set()
            for t in clients:
                t.join()
        self.assertEqual(failures, [])
        self.assertGreater(answers[0], 0)
        metrics = urllib.request.urlopen(
            f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=30).read().decode()
        steps = [line for line in metrics.splitlines()
                 if line.startswith('ndserve_train_steps_total{model="mlp"}')]
        self.assertEqual(len(steps), 1, metrics)
        self.assertGreaterEqual(float(steps[0].split()[-1]), 20)
        self.assertIn('ndserve_train_loss{model="mlp"}', metrics)
        self.assertIn('ndserve_train_step_duration_seconds_count{model="mlp"}', metrics)

    def test_abort_list_and_unknown_sessions(self):
        session = self.start().session_id
        x, y = next(mlp_batches(1))
        self.assertEqual(len(list(self.trainer.Train(iter([batch_message(session, x, y)]),
                                                     metadata=self.auth))), 1)
        self.trainer.Abort(train_pb2.AbortRequest(session_id=session), metadata=self.auth)
        self.assertEqual(len(self.trainer.ListSessions(train_pb2.ListSessionsRequest(),
                                                       metadata=self.auth).sessions), 0)
        nf = grpc.StatusCode.NOT_FOUND
        self.assert_code(nf, lambda: self.trainer.Abort(
            train_pb2.AbortRequest(session_id=session), metadata=self.auth), session)
        self.assert_code(nf, lambda: self.trainer.Commit(
            train_pb2.CommitRequest(session_id="no-such"), metadata=self.auth), "no-such")
        self.assert_code(nf, lambda: list(self.trainer.Train(
            iter([batch_message("no-such", x, y)]), metadata=self.auth)), "no-such")
        self.assert_code(nf, lambda: self.start(model="resnet"), "resnet")

    def test_bad_input_is_invalid_argument_naming_it(self):
        ia = grpc.StatusCode.INVALID_ARGUMENT
        self.assert_code(ia, lambda: self.start(loss="hinge"), "hinge")
        self.assert_code(ia, lambda: self.start(optimizer="lbfgs"), "lbfgs")
        self.assert_code(ia, lambda: self.start(target_output="fc9"), "fc9")
        self.assert_code(ia, lambda: self.start(trainable=["fc9.weight"]), "fc9.weight")
        session = self.start().session_id
        x, y = next(mlp_batches(1))
        wrong = train_pb2.Batch(session_id=session, inputs=[tensor("inptu", x, "FP32")],
                                labels=tensor("labels", y, "INT64"))
        self.assert_code(ia, lambda: list(self.trainer.Train(iter([wrong]),
                                                             metadata=self.auth)), "inptu")
        short = batch_message(session, x, y)
        short.inputs[0].raw = short.inputs[0].raw[:-4]
        self.assert_code(ia, lambda: list(self.trainer.Train(iter([short]),
                                                             metadata=self.auth)), "input")
        # The session survived its bad batches.
        self.assertEqual(len(list(self.trainer.Train(iter([batch_message(session, x, y)]),
                                                     metadata=self.auth))), 1)

    def batch_scopes(self):
        """Open batch-level managers (steps' scopes and uploaded batches), from /metrics."""
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                      timeout=30).read().decode()
        return sum(float(line.split()[-1]) for line in text.splitlines()
                   if line.startswith("ndserve_manager_live{") and 'level="batch"' in line)

    def assert_batches_freed(self):
        # The client has the stream's status before the server's handler has joined its
        # reader and freed the batches: wait for that (no deadline in the assertion).
        deadline = time.time() + 60
        while self.batch_scopes() != 0 and time.time() < deadline:
            time.sleep(0.05)
        self.assertEqual(self.batch_scopes(), 0)

    def lockstep(self, messages):
        """A client that sends batch k+1 only once it has step k's result: returns the
        request iterator and the function that hands it each result."""
        replies = queue.Queue()

        def requests():
            for i, message in enumerate(messages):
                if i > 0 and replies.get() is None:
                    return
                yield message
        return requests(), replies

    def test_the_train_stream_reads_ahead_of_a_client_that_sends_ahead(self):
        session = self.start().session_id
        batches = list(mlp_batches(4))
        messages = [batch_message(session if i == 0 else "", *batches[i % 4]) for i in range(20)]
        results = list(self.trainer.Train(iter(messages), metadata=self.auth, timeout=300))
        self.assertEqual([r.step for r in results], list(range(1, 21)))
        held = [r.batches_held for r in results]
        # The server's reader thread uploads batch k+1 while step k runs, two at most.
        self.assertIn(2, held)
        self.assertTrue(all(1 <= h <= 2 for h in held), held)
        self.assertEqual(held[-1], 1)
        self.assert_batches_freed()

    def test_a_client_that_waits_for_each_result_is_not_stalled(self):
        session = self.start().session_id
        batches = list(mlp_batches(6))
        requests, replies = self.lockstep(
            [batch_message(session if i == 0 else "", *b) for i, b in enumerate(batches)])
        results = []
        try:
            for r in self.trainer.Train(requests, metadata=self.auth, timeout=300):
                results.append(r)
                replies.put(r)
        finally:
            replies.put(None)
        self.assertEqual([r.step for r in results], list(range(1, 7)))
        # Batch k+1 is sent after step k's result: each step holds only its own.
        self.assertEqual([r.batches_held for r in results], [1] * 6)
        self.assert_batches_freed()

    def test_a_failed_step_or_a_cancel_ends_the_stream_and_frees_its_batches(self):
        session = self.start().session_id
        (x, y), = mlp_batches(1)
        wrong = train_pb2.Batch(inputs=[tensor("inptu", x, "FP32")],
                                labels=tensor("labels", y, "INT64"))
        # The server's reader waits for batch 2, which this client sends only after the
        # result of batch 1: the step's error must still reach it.
        requests, replies = self.lockstep(
            [batch_message(session, x, y), wrong, batch_message("", x, y)])
        results = []
        with self.assertRaises(grpc.RpcError) as caught:
            try:
                for r in self.trainer.Train(requests, metadata=self.auth, timeout=300):
                    results.append(r)
                    replies.put(r)
            finally:
                replies.put(None)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT,
                         caught.exception.details())
        self.assertIn("inptu", caught.exception.details())
        self.assertEqual(len(results), 1)
        self.assert_batches_freed()

        # A client that cancels while the server waits for its next batch.
        requests, replies = self.lockstep([batch_message(session, x, y)] * 3)
        call = self.trainer.Train(requests, metadata=self.auth, timeout=300)
        self.assertEqual(next(call).step, 2)
        call.cancel()
        replies.put(None)
        self.assertEqual(call.code(), grpc.StatusCode.CANCELLED)
        self.assert_batches_freed()
        # The session goes on after both.
        results = list(self.trainer.Train(iter([batch_message(session, x, y)]),
                                          metadata=self.auth, timeout=300))
        self.assertEqual([r.step for r in results], [3])

    def test_sessions_per_model_are_bounded(self):
        for _ in range(4):
            self.start()
        self.assert_code(grpc.StatusCode.RESOURCE_EXHAUSTED, self.start, "mlp")

    def test_idle_sessions_expire(self):
        session = self.start().session_id
        deadline = time.time() + 60
        while time.time() < deadline:
            listed = self.trainer.ListSessions(train_pb2.ListSessionsRequest(),
                                               metadata=self.auth).sessions
            if not listed:
                break
            time.sleep(0.5)
        self.assertEqual(len(listed), 0)
        self.assert_code(grpc.StatusCode.NOT_FOUND, lambda: self.trainer.Commit(
            train_pb2.CommitRequest(session_id=session), metadata=self.auth))

    def cli(self, *args):
        return subprocess.run(
            [os.environ["NDSERVE_CLI"], f"--admin=127.0.0.1:{self.admin_port}",
             f"--token_file={self.token_file}", "train", *args],
            capture_output=True, text=True, timeout=120)

    def test_the_cli_drives_a_session(self):
        started = self.cli("start", "--model=mlp", "--target_output=fc2", "--optimizer=adam",
                           "--lr=0.01")
        self.assertEqual(started.returncode, 0, started.stderr)
        session = started.stdout.strip()
        stepped = self.cli("step", f"--session={session}", "--steps=3", "--random_max=10",
                           "input:FP32:8x64:random", "--labels=labels:INT64:8:random")
        self.assertEqual(stepped.returncode, 0, stepped.stderr)
        self.assertEqual([line.split()[:2] for line in stepped.stdout.splitlines()],
                         [["step", "1"], ["step", "2"], ["step", "3"]])
        listed = self.cli("list")
        self.assertIn(f"{session} mlp", listed.stdout)
        self.assertIn("3 steps", listed.stdout)
        bad = self.cli("step", f"--session={session}", "input:FP32:8x64:zeros",
                       "--labels=labels:FP32:8:zeros")
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("INVALID_ARGUMENT", bad.stderr)
        self.assertEqual(self.cli("abort", f"--session={session}").returncode, 0)
        gone = self.cli("commit", f"--session={session}")
        self.assertNotEqual(gone.returncode, 0)
        self.assertIn("NOT_FOUND", gone.stderr)

    def test_the_admin_token_rule_applies(self):
        self.assert_code(grpc.StatusCode.UNAUTHENTICATED, lambda: self.trainer.ListSessions(
            train_pb2.ListSessionsRequest()))
        self.assert_code(grpc.StatusCode.UNAUTHENTICATED, lambda: self.trainer.StartSession(
            train_pb2.StartSessionRequest(model="mlp"),
            metadata=[("authorization", "Bearer wrong")]))


if __name__ == "__main__":
    unittest.main()
