"""A real Prometheus server scrapes ndserved on loopback for a few intervals, and the
pool gauge comes back through Prometheus' HTTP query API with the labels the dashboards
and alerts use. Skipped when Debian's prometheus binary is missing.

Needs NDSERVED and NDSERVE_PROTO_PYTHON_DIR (ctest sets both).
"""

import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

from ndserve_grpc import free_port
from test_daemon_lifecycle import Daemon

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


def query(port, expr):
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as reply:
        body = json.load(reply)
    assert body["status"] == "success", body
    return body["data"]["result"]


@unittest.skipUnless(os.path.exists(PROMETHEUS), "Debian's prometheus is not installed")
class PrometheusScrapeTest(unittest.TestCase):

    def test_prometheus_reads_pool_gauges_from_the_daemon(self):
        models = os.path.join(os.environ["NDSERVE_SOURCE_DIR"], "examples", "models")
        daemon = Daemon(f"--model_repository={models}")
        workdir = tempfile.mkdtemp(prefix="ndserve-prom-")
        prom = None
        try:
            daemon.wait_ready()
            config = os.path.join(workdir, "prometheus.yml")
            with open(config, "w") as f:
                f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                        "scrape_configs:\n  - job_name: ndserve\n    static_configs:\n"
                        f"      - targets: ['127.0.0.1:{daemon.metrics_port}']\n")
            web_port = free_port()
            prom = subprocess.Popen(
                [PROMETHEUS, f"--config.file={config}",
                 f"--storage.tsdb.path={os.path.join(workdir, 'data')}",
                 f"--web.listen-address=127.0.0.1:{web_port}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
            # A few scrape intervals: the series must be there and the target healthy.
            deadline = time.time() + 60
            result = []
            while time.time() < deadline and not result:
                time.sleep(1)
                try:
                    result = query(web_port, 'ndserve_memory_allocated_bytes{job="ndserve"}')
                except OSError:
                    continue  # Prometheus still starting
            self.assertTrue(result, "Prometheus never scraped ndserve_memory_allocated_bytes")
            series = result[0]
            self.assertEqual(series["metric"]["device"], "cpu:0")
            self.assertEqual(series["metric"]["pool"], "binned")
            # mlp and recsys parameters live in the pool: tens of MiB allocated.
            self.assertGreater(float(series["value"][1]), 40 * 2**20)
            up = query(web_port, 'up{job="ndserve"}')
            self.assertEqual(up[0]["value"][1], "1")
            models = query(web_port, "ndserve_model_loaded")
            self.assertEqual(sorted(m["metric"]["model"] for m in models), ["mlp", "recsys"])
        finally:
            if prom is not None:
                prom.terminate()
                prom.wait(timeout=30)
            code, log = daemon.stop()
            shutil.rmtree(workdir, ignore_errors=True)
        self.assertEqual(code, 0, log)


if __name__ == "__main__":
    unittest.main()
