"""The KServe v2 HTTP/REST binding of a real ndserved, driven as its users do: Python
`requests` (Debian's python3-requests), `curl`, and raw sockets for what well-behaved
clients never send. Every endpoint; JSON and binary infer against the gRPC answer for the
same request; errors with their HTTP status and {"error": ...}; keep-alive and concurrent
connections; the daemon still serving after bad input.

Needs NDSERVED, NDSERVE_PROTO_PYTHON_DIR and NDSERVE_SOURCE_DIR (ctest sets them); run
with Debian's /usr/bin/python3.
"""

import concurrent.futures
import http.client
import json
import os
import socket
import subprocess
import time
import unittest

import grpc
import numpy as np
import requests

from ndserve_grpc import UNLIMITED, inference_pb2_grpc, start_daemon, wait_http_ok
from kserve_http_body import binary_infer_body, json_infer_body
from test_infer import SOURCE_DIR, NUMPY_DTYPE, infer_request, outputs_of, read_case

HEADER = "Inference-Header-Content-Length"
MAX_REQUEST = 1 << 20


def json_request(inputs, nested=True, binary_outputs=False):
    if binary_outputs:
        return json_infer_body(inputs, nested, outputs=[],
                               parameters={"binary_data_output": True})
    return json_infer_body(inputs, nested)


def split_binary(reply):
    """(json header, {output name: numpy array}) of a binary infer reply."""
    n = int(reply.headers[HEADER])
    header = json.loads(reply.content[:n])
    arrays, pos = {}, n
    for out in header["outputs"]:
        size = out["parameters"]["binary_data_size"]
        arrays[out["name"]] = np.frombuffer(reply.content[pos:pos + size],
                                            dtype=NUMPY_DTYPE[out["datatype"]]).reshape(
                                                out["shape"])
        pos += size
    assert pos == len(reply.content)
    return header, arrays


class HttpTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = start_daemon(
            ["--http_read_timeout_seconds=2", f"--max_request_bytes={MAX_REQUEST}",
             "--http_threads=32"], SOURCE_DIR, http=True,
            ready=lambda d: wait_http_ok(d.proc, f"http://127.0.0.1:{d.http_port}/v2/health/ready"))
        cls.grpc_port, cls.http_port = cls.daemon.grpc_port, cls.daemon.http_port
        cls.url = f"http://127.0.0.1:{cls.http_port}"
        cls.session = requests.Session()
        cls.channel = grpc.insecure_channel(f"127.0.0.1:{cls.grpc_port}", options=UNLIMITED)
        cls.stub = inference_pb2_grpc.GRPCInferenceServiceStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.session.close()
        cls.channel.close()
        code, log = cls.daemon.stop()
        assert code == 0, log

    def get(self, path, **kw):
        return self.session.get(self.url + path, timeout=60, **kw)

    def post(self, path, **kw):
        return self.session.post(self.url + path, timeout=60, **kw)

    def assert_error(self, reply, status, text):
        self.assertEqual(reply.status_code, status, reply.text)
        self.assertIn(text, reply.json()["error"])

    def curl(self, *args):
        out = subprocess.run(["curl", "-sS", "-w", "\n%{http_code}", *args], check=True,
                             capture_output=True, text=True, timeout=60).stdout
        body, _, code = out.rpartition("\n")
        return int(code), body

    # ---- health and metadata ------------------------------------------------------

    def test_health(self):
        self.assertEqual(self.get("/v2/health/live").status_code, 200)
        self.assertEqual(self.get("/v2/health/ready").status_code, 200)
        self.assertEqual(self.curl(f"{self.url}/v2/health/ready")[0], 200)
        self.assertEqual(self.get("/v2/models/mlp/ready").status_code, 200)
        self.assertEqual(self.get("/v2/models/mlp/versions/1/ready").status_code, 200)
        # As Triton: not ready (unknown included) is 400.
        self.assert_error(self.get("/v2/models/nope/ready"), 400, "not ready")

    def test_server_metadata(self):
        md = self.get("/v2").json()
        self.assertEqual(md["name"], "ndserve")
        self.assertIn("model_repository", md["extensions"])

    def test_model_metadata_config_and_stats(self):
        for path in ("/v2/models/mlp", "/v2/models/mlp/versions/1"):
            md = self.get(path).json()
            self.assertEqual(md["name"], "mlp")
            self.assertEqual(md["versions"], ["1"])
            self.assertEqual(md["inputs"][0], {"name": "input", "datatype": "FP32",
                                               "shape": [-1, 64]})
        code, body = self.curl(f"{self.url}/v2/models/recsys")
        self.assertEqual(code, 200)
        self.assertEqual([t["name"] for t in json.loads(body)["inputs"]],
                         list(read_case("recsys")[0]))
        config = self.get("/v2/models/mlp/config").json()
        self.assertEqual(config["name"], "mlp")
        self.assertEqual(config["max_batch_size"], 64)
        self.post("/v2/models/mlp/infer", json=json_request(read_case("mlp")[0]))
        stats = self.get("/v2/models/mlp/stats").json()["model_stats"]
        self.assertEqual(stats[0]["name"], "mlp")
        self.assertGreater(int(stats[0]["inference_count"]), 0)
        names = {s["name"] for s in self.get("/v2/models/stats").json()["model_stats"]}
        self.assertTrue({"mlp", "recsys"} <= names)
        self.assert_error(self.get("/v2/models/nope"), 404, "nope")
        self.assert_error(self.get("/v2/models/mlp/versions/x"), 400, "version 'x'")
        self.assert_error(self.get("/v2/no/such/thing"), 404, "no such endpoint")

    # ---- infer ----------------------------------------------------------------------

    def grpc_outputs(self, model, inputs):
        return outputs_of(self.stub.ModelInfer(infer_request(model, inputs), timeout=60))

    def test_json_infer_matches_grpc(self):
        for model in ("mlp", "recsys"):
            inputs, outputs, atol, rtol = read_case(model)
            want = self.grpc_outputs(model, inputs)
            for nested in (True, False):
                reply = self.post(f"/v2/models/{model}/infer",
                                  json=json_request(inputs, nested=nested))
                self.assertEqual(reply.status_code, 200, reply.text)
                self.assertEqual(reply.headers["Content-Type"], "application/json")
                body = reply.json()
                self.assertEqual(body["model_name"], model)
                self.assertEqual(body["model_version"], "1")
                self.assertEqual(body["id"], "http-1")
                for out in body["outputs"]:
                    got = np.array(out["data"], dtype=NUMPY_DTYPE[out["datatype"]]).reshape(
                        out["shape"])
                    np.testing.assert_array_equal(got, want[out["name"]])
                    np.testing.assert_allclose(got, outputs[out["name"]][1], atol=atol, rtol=rtol)

    def test_binary_infer_matches_grpc_bytes(self):
        for model in ("mlp", "recsys"):
            inputs, _, _, _ = read_case(model)
            want = self.grpc_outputs(model, inputs)
            body, n = binary_infer_body(inputs)
            reply = self.post(f"/v2/models/{model}/versions/1/infer", data=body,
                              headers={HEADER: str(n)})
            self.assertEqual(reply.status_code, 200, reply.text)
            self.assertEqual(reply.headers["Content-Type"], "application/octet-stream")
            _, got = split_binary(reply)
            self.assertEqual(sorted(got), sorted(want))
            for name in want:
                self.assertEqual(got[name].tobytes(), want[name].tobytes())

    def test_curl_infer(self):
        inputs, _, _, _ = read_case("mlp")
        code, body = self.curl("-X", "POST", "-H", "Content-Type: application/json",
                               "-d", json.dumps(json_request(inputs)),
                               f"{self.url}/v2/models/mlp/infer")
        self.assertEqual(code, 200, body)
        self.assertEqual(json.loads(body)["outputs"][0]["name"], "probabilities")

    def test_requested_output_binary_per_output(self):
        inputs, _, _, _ = read_case("mlp")
        body = json_request(inputs)
        body["outputs"] = [{"name": "probabilities", "parameters": {"binary_data": True}}]
        reply = self.post("/v2/models/mlp/infer", json=body)
        self.assertEqual(reply.status_code, 200, reply.text)
        _, got = split_binary(reply)
        self.assertEqual(got["probabilities"].tobytes(),
                         self.grpc_outputs("mlp", inputs)["probabilities"].tobytes())
        body["outputs"] = [{"name": "nope"}]
        self.assert_error(self.post("/v2/models/mlp/infer", json=body), 400, "nope")

    # ---- errors -------------------------------------------------------------------

    def test_bad_requests_get_clear_errors(self):
        inputs, _, _, _ = read_case("mlp")
        self.assert_error(self.post("/v2/models/mlp/infer", data=b"{not json"), 400,
                          "malformed JSON")
        self.assert_error(self.post("/v2/models/mlp/infer", json={"inputs": 3}), 400, "inputs")
        self.assert_error(self.post("/v2/models/resnet/infer", json=json_request(inputs)), 404,
                          "resnet")
        short = json_request(inputs, nested=False)
        short["inputs"][0]["data"] = short["inputs"][0]["data"][:-16]
        self.assert_error(self.post("/v2/models/mlp/infer", json=short), 400,
                          "input 'input': expected 768 bytes for shape [3,64] FP32, got 704")
        body, n = binary_infer_body(inputs)
        self.assert_error(self.post("/v2/models/mlp/infer", data=body,
                                    headers={HEADER: str(len(body) + 1)}), 400,
                          "larger than the body")
        self.assert_error(self.post("/v2/models/mlp/infer", data=body[:-4],
                                    headers={HEADER: str(n)}), 400, "runs past the end")
        # Over the limit, by Content-Length or by a chunked body's running size: 413, and
        # the same keep-alive connection (one Session) goes on serving.
        self.assert_error(self.post("/v2/models/mlp/infer", data=b"x" * (MAX_REQUEST + 1)), 413,
                          "max_request_bytes")
        big = (b"x" * 65536 for _ in range(MAX_REQUEST // 65536 + 1))
        self.assert_error(self.post("/v2/models/mlp/infer", data=big), 413, "max_request_bytes")
        self.assertEqual(self.post("/v2/models/mlp/infer", json=json_request(inputs)).status_code,
                         200)
        # A chunked body within the limit is served like any other.
        text = json.dumps(json_request(inputs)).encode()
        chunks = (text[i:i + 100] for i in range(0, len(text), 100))
        reply = self.post("/v2/models/mlp/infer", data=chunks)
        self.assertEqual(reply.status_code, 200, reply.text)
        self.assertEqual(reply.json()["outputs"][0]["name"], "probabilities")

    def test_lying_and_slow_clients_are_dropped(self):
        # A Content-Length larger than what is sent: the read times out
        # (--http_read_timeout_seconds=2) and the connection is answered or closed.
        with socket.create_connection(("127.0.0.1", self.http_port), timeout=30) as s:
            s.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Length: 1000\r\n\r\n{\"inputs\":")
            start = time.time()
            reply = s.recv(4096)
            self.assertLess(time.time() - start, 25)
            self.assertTrue(reply == b"" or reply.startswith(b"HTTP/1.1 400"), reply)
        # Headers that never end.
        with socket.create_connection(("127.0.0.1", self.http_port), timeout=30) as s:
            s.sendall(b"GET /v2 HTTP/1.1\r\nHost: x\r\n")
            self.assertIn(s.recv(4096)[:12], (b"", b"HTTP/1.1 400"))
        # Garbage instead of HTTP.
        with socket.create_connection(("127.0.0.1", self.http_port), timeout=30) as s:
            s.sendall(b"\x00\xff garbage\r\n\r\n")
            self.assertIn(s.recv(4096)[:12], (b"", b"HTTP/1.1 400"))
        self.assertEqual(self.get("/v2/health/live").status_code, 200)
        self.assertEqual(self.post("/v2/models/mlp/infer",
                                   json=json_request(read_case("mlp")[0])).status_code, 200)

    # ---- connections --------------------------------------------------------------

    def test_keep_alive_reuses_one_connection(self):
        inputs, _, _, _ = read_case("mlp")
        body = json.dumps(json_request(inputs))
        conn = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=60)
        conn.connect()
        sock = conn.sock
        for _ in range(20):
            conn.request("POST", "/v2/models/mlp/infer", body=body,
                         headers={"Content-Type": "application/json"})
            reply = conn.getresponse()
            reply.read()
            self.assertEqual(reply.status, 200)
            self.assertNotEqual(reply.getheader("Connection"), "close")
            self.assertIs(conn.sock, sock)
        conn.close()

    def test_concurrent_connections(self):
        inputs, _, atol, rtol = read_case("mlp")
        want = self.grpc_outputs("mlp", inputs)["probabilities"]
        body, n = binary_infer_body(inputs)

        def client(_):
            with requests.Session() as s:
                for _ in range(10):
                    reply = s.post(f"{self.url}/v2/models/mlp/infer", data=body,
                                   headers={HEADER: str(n)}, timeout=120)
                    if reply.status_code != 200:
                        return reply.text
                    got = split_binary(reply)[1]["probabilities"]
                    # Concurrent requests share batches, and a row's last bits depend on
                    # the batch it ran in: close, not bit-equal.
                    if not np.allclose(got, want, atol=atol, rtol=rtol):
                        return f"{got} != {want}"
            return None

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            self.assertEqual([e for e in pool.map(client, range(16)) if e is not None], [])

    # ---- ndserve-cli --http ------------------------------------------------------------

    def cli(self, *args):
        cli = os.path.join(os.path.dirname(os.environ["NDSERVED"]), "ndserve-cli")
        return subprocess.run([cli, *args], capture_output=True, text=True, timeout=60)

    def test_cli_over_http(self):
        http = f"--http=127.0.0.1:{self.http_port}"
        health = self.cli("health", http)
        self.assertEqual(health.returncode, 0, health.stderr)
        self.assertEqual(health.stdout, "liveness: SERVING\nreadiness: SERVING\n")
        md = self.cli("metadata", "--model=mlp", http)
        self.assertEqual(md.returncode, 0, md.stderr)
        self.assertEqual(json.loads(md.stdout)["inputs"][0]["shape"], [-1, 64])
        values = ",".join(str(i / 64) for i in range(64))
        over_http = self.cli("infer", "--model=mlp", http, f"input:FP32:1x64:{values}")
        over_grpc = self.cli("infer", "--model=mlp", f"--server=127.0.0.1:{self.grpc_port}",
                             f"input:FP32:1x64:{values}")
        self.assertEqual(over_http.returncode, 0, over_http.stderr)
        # The same printed outputs (the first line holds the call's time).
        self.assertEqual(over_http.stdout.splitlines()[1:], over_grpc.stdout.splitlines()[1:])
        self.assertIn("probabilities FP32 [1x10]", over_http.stdout)
        missing = self.cli("infer", "--model=nope", http, f"input:FP32:1x64:{values}")
        self.assertEqual(missing.returncode, 1)
        self.assertIn("NOT_FOUND", missing.stderr)

    # ---- repository -----------------------------------------------------------------

    def test_repository_index_unload_load(self):
        index = self.post("/v2/repository/index").json()
        self.assertIn({"name": "mlp", "version": "1", "state": "READY", "reason": ""}, index)
        self.assertEqual(self.post("/v2/repository/index", json={"ready": True}).status_code, 200)
        self.assert_error(self.post("/v2/repository/index", data=b"[1]"), 400, "JSON object")
        self.assertEqual(self.post("/v2/repository/models/recsys/unload").status_code, 200)
        self.assertEqual(self.get("/v2/models/recsys/ready").status_code, 400)
        inputs, _, _, _ = read_case("recsys")
        self.assertNotEqual(self.post("/v2/models/recsys/infer",
                                      json=json_request(inputs)).status_code, 200)
        code, text = self.curl("-X", "POST", f"{self.url}/v2/repository/models/recsys/load")
        self.assertEqual(code, 200, text)
        self.assertEqual(self.get("/v2/models/recsys/ready").status_code, 200)
        self.assertEqual(self.post("/v2/models/recsys/infer",
                                   json=json_request(inputs)).status_code, 200)
        reply = self.post("/v2/repository/models/nope/load")
        self.assertIn(reply.status_code, (400, 404), reply.text)
        self.assertIn("nope", reply.json()["error"])


if __name__ == "__main__":
    unittest.main()
