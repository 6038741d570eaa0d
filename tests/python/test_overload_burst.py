"""Overload of a model that is the bottleneck (README "Failure behaviour", docs/design.md §5):
a burst far beyond a slow model's queue is answered at once with UNAVAILABLE for the
requests that find the queue full, each counted in ndserve_inference_rejected_total; the
admitted ones succeed; and the daemon serves normally right after.

The model is tools/gen_slow_mlp.py's (a few milliseconds per run on one core, one
instance, no merging) with max_queue_size 4. No timing assertion: "at once" is checked
as an order (most refusals arrive before the last admitted request's answer, which waits
for the runs ahead of it), and the time limits are hang guards.

Needs NDSERVED, NDSERVE_PROTO_PYTHON_DIR and NDSERVE_SOURCE_DIR (ctest sets them); run
with Debian's /usr/bin/python3.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import grpc
import requests

from ndserve_grpc import free_port, inference_pb2, inference_pb2_grpc, wait_grpc_ready

SOURCE_DIR = os.environ.get("NDSERVE_SOURCE_DIR", ".")
MAX_QUEUE = 4
BURST = 64


def slow_request():
    request = inference_pb2.ModelInferRequest(model_name="slow_mlp")
    request.inputs.add(name="input", datatype="FP32", shape=[1, 1024])
    request.raw_input_contents.append(bytes(1024 * 4))
    return request


class OverloadBurstTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.repo = tempfile.mkdtemp(prefix="ndserve-overload-burst-")
        subprocess.run([sys.executable, os.path.join(SOURCE_DIR, "tools/gen_slow_mlp.py"),
                        "--out", cls.repo, "--max_queue_size", str(MAX_QUEUE)], check=True)
        cls.log = tempfile.NamedTemporaryFile(prefix="ndserved-overload-burst-", suffix=".log",
                                              delete=False)
        # One core for the model's GEMMs, as in scripts/overload-bench.sh.
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        for _ in range(5):
            cls.grpc_port, cls.metrics_port = free_port(), free_port()
            args = [os.environ["NDSERVED"], f"--grpc_address=127.0.0.1:{cls.grpc_port}",
                    f"--metrics_address=127.0.0.1:{cls.metrics_port}",
                    f"--admin_address=127.0.0.1:{free_port()}", "--http_address=",
                    "--device=cpu", f"--model_repository={cls.repo}",
                    "--exit_timeout_seconds=5"]
            cls.log.seek(0)
            cls.log.truncate()
            cls.proc = subprocess.Popen(args, cwd=SOURCE_DIR, env=env, stdout=cls.log,
                                        stderr=subprocess.STDOUT)
            if wait_grpc_ready(cls.proc, cls.grpc_port):
                break
            cls.proc.kill()
            cls.proc.wait()
            if "cannot listen" not in cls._log_text():
                raise AssertionError("ndserved did not start:\n" + cls._log_text())
        cls.channel = grpc.insecure_channel(f"127.0.0.1:{cls.grpc_port}")
        cls.stub = inference_pb2_grpc.GRPCInferenceServiceStub(cls.channel)

    @classmethod
    def _log_text(cls):
        with open(cls.log.name, errors="replace") as f:
            return f.read()

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.proc.terminate()
        cls.proc.wait(timeout=30)
        shutil.rmtree(cls.repo, ignore_errors=True)
        cls.log.close()
        os.unlink(cls.log.name)

    def rejected(self, reason):
        text = requests.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10).text
        total = 0.0
        for labels, value in re.findall(r"^ndserve_inference_rejected_total\{(.*)\} (\S+)$",
                                        text, re.M):
            if 'model="slow_mlp"' in labels and f'reason="{reason}"' in labels:
                total += float(value)
        return total

    def burst(self):
        """Sends BURST requests at once; returns [(code, details, answered_at)]."""
        request = slow_request()
        answers = []
        lock = threading.Lock()
        done = threading.Event()

        def on_done(future):
            at = time.monotonic()
            error = future.exception()
            with lock:
                answers.append((grpc.StatusCode.OK if error is None else error.code(),
                                "" if error is None else error.details(), at))
                if len(answers) == BURST:
                    done.set()

        futures = [self.stub.ModelInfer.future(request, timeout=120) for _ in range(BURST)]
        for f in futures:
            f.add_done_callback(on_done)
        self.assertTrue(done.wait(180), "the burst was not answered")
        return answers

    def test_a_burst_is_refused_at_once_counted_and_the_daemon_recovers(self):
        for round_ in range(2):  # the second burst finds the daemon as the first did
            with self.subTest(round=round_):
                before = self.rejected("queue_full")
                answers = self.burst()
                ok = [a for a in answers if a[0] == grpc.StatusCode.OK]
                refused = [a for a in answers if a[0] != grpc.StatusCode.OK]
                self.assertGreaterEqual(len(ok), 1)
                self.assertGreater(len(refused), 0, "nothing refused: the queue never filled")
                for code, details, _ in refused:
                    self.assertEqual(code, grpc.StatusCode.UNAVAILABLE, details)
                    self.assertIn("queue is full", details)
                self.assertEqual(self.rejected("queue_full") - before, len(refused))
                # Refused on arrival, not after waiting: most refusals are answered before
                # the last admitted request, which waited for the runs ahead of it.
                last_ok = max(a[2] for a in ok)
                early = sum(1 for a in refused if a[2] < last_ok)
                self.assertGreater(early, len(refused) // 2,
                                   f"{early} of {len(refused)} refusals came before the last "
                                   "admitted answer")
                # Serving normally right after.
                for _ in range(5):
                    reply = self.stub.ModelInfer(slow_request(), timeout=60)
                    self.assertEqual(list(reply.outputs[0].shape), [1, 16])


if __name__ == "__main__":
    unittest.main()
