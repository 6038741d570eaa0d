"""ndserved's listeners and lifecycle, before any model: start-up errors, health,
admin (with and without a token), /metrics, and the graceful SIGTERM/SIGINT exit.

Needs NDSERVED (the binary) and NDSERVE_PROTO_PYTHON_DIR; ctest sets both. promtool
is used when installed.
"""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.request

import grpc

from ndserve_grpc import (admin_pb2, admin_pb2_grpc, free_port, health_pb2, health_pb2_grpc)

SERVING = health_pb2.HealthCheckResponse.SERVING


class Daemon:
    """One ndserved process on free local ports."""

    def __init__(self, *flags, env=None):
        self.grpc_port, self.metrics_port, self.admin_port = free_port(), free_port(), free_port()
        self.repo = tempfile.mkdtemp(prefix="ndserve-repo-")
        args = [os.environ["NDSERVED"], f"--grpc_address=127.0.0.1:{self.grpc_port}",
                "--http_address=",
                f"--metrics_address=127.0.0.1:{self.metrics_port}",
                f"--admin_address=127.0.0.1:{self.admin_port}", f"--model_repository={self.repo}",
                "--device=cpu", "--exit_timeout_seconds=5", *flags]
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("NDSERVE_MEMORY")}
        full_env.update(env or {})
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, env=full_env)
        self.channels = []

    def channel(self, port):
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.channels.append(channel)
        return channel

    def wait_ready(self, timeout=30):
        deadline = time.time() + timeout
        # Connect only once the port is open: a refused first attempt puts the gRPC
        # channel into reconnect backoff (1 s, 1.6 s, 2.6 s, ...).
        while time.time() < deadline and self.proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", self.grpc_port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        stub = health_pb2_grpc.HealthStub(self.channel(self.grpc_port))
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError("ndserved exited: " + self.proc.stdout.read())
            try:
                if stub.Check(health_pb2.HealthCheckRequest(service="readiness"),
                              timeout=1).status == SERVING:
                    return stub
            except grpc.RpcError:
                pass
            time.sleep(0.1)
        raise AssertionError("ndserved did not become ready")

    def admin(self):
        return admin_pb2_grpc.MemoryAdminStub(self.channel(self.admin_port))

    def stop(self, sig=signal.SIGTERM):
        # Polite clients hang up: gRPC's shutdown waits (up to the exit timeout) for open
        # connections to close after its GOAWAY, and an idle Python channel is slow to.
        for channel in self.channels:
            channel.close()
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout=30)
        return code, self.proc.stdout.read()

    def kill(self):
        for channel in self.channels:
            channel.close()
        self.proc.stdout.close()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.repo, ignore_errors=True)


class StartupErrorTest(unittest.TestCase):
    def run_daemon(self, *flags, env=None):
        daemon = Daemon(*flags, env=env)
        try:
            code = daemon.proc.wait(timeout=30)
            return code, daemon.proc.stdout.read()
        finally:
            daemon.kill()

    def test_bad_flag_names_the_flag(self):
        code, out = self.run_daemon("--memory_limit=lots")
        self.assertNotEqual(code, 0)
        self.assertIn("--memory_limit", out)

    def test_bad_environment_names_the_variable(self):
        code, out = self.run_daemon(env={"NDSERVE_MEMORY_POOL": "buddy"})
        self.assertNotEqual(code, 0)
        self.assertIn("NDSERVE_MEMORY_POOL", out)

    def test_public_admin_without_token_is_refused(self):
        code, out = self.run_daemon("--admin_address=0.0.0.0:0")
        self.assertNotEqual(code, 0)
        self.assertIn("--admin_token_file", out)

    def test_public_admin_token_without_tls_is_refused(self):
        with tempfile.NamedTemporaryFile("w", suffix=".token", delete=False) as f:
            f.write("t0ken\n")
        try:
            code, out = self.run_daemon("--admin_address=0.0.0.0:0",
                                        f"--admin_token_file={f.name}")
        finally:
            os.unlink(f.name)
        self.assertNotEqual(code, 0)
        self.assertIn("--admin_tls_cert", out)


class LifecycleTest(unittest.TestCase):
    def test_serves_then_drains_on_sigterm(self):
        daemon = Daemon("--debug_level=1")
        try:
            health = daemon.wait_ready()
            self.assertEqual(health.Check(health_pb2.HealthCheckRequest(service="liveness")).status,
                             SERVING)
            status = daemon.admin().GetMemoryStatus(admin_pb2.GetMemoryStatusRequest(device_id=-1))
            self.assertEqual([p.device for p in status.pools], ["cpu:0"])
            dump = daemon.admin().DebugDump(admin_pb2.DebugDumpRequest())
            self.assertEqual(dump.root.children[0].name, "system/1")

            text = urllib.request.urlopen(
                f"http://127.0.0.1:{daemon.metrics_port}/metrics", timeout=10).read().decode()
            for family in ("ndserve_memory_allocated_bytes", "ndserve_memory_oom_total",
                           "ndserve_manager_live", "process_resident_memory_bytes"):
                self.assertIn(f"# TYPE {family} ", text)
            if shutil.which("promtool"):
                check = subprocess.run(["promtool", "check", "metrics"], input=text, text=True,
                                       capture_output=True)
                self.assertEqual(check.returncode, 0, check.stdout + check.stderr)

            code, log = daemon.stop(signal.SIGTERM)
            self.assertEqual(code, 0, log)
            self.assertIn("shutting down", log)
            self.assertIn("final pool status on cpu:0: 0 B allocated", log)
        finally:
            daemon.kill()

    def test_sigint_also_exits_cleanly(self):
        daemon = Daemon()
        try:
            daemon.wait_ready()
            code, log = daemon.stop(signal.SIGINT)
            self.assertEqual(code, 0, log)
        finally:
            daemon.kill()

    def test_admin_token(self):
        with tempfile.NamedTemporaryFile("w", suffix=".token", delete=False) as f:
            f.write("t0ken\n")
        daemon = Daemon(f"--admin_token_file={f.name}")
        try:
            daemon.wait_ready()
            admin = daemon.admin()
            request = admin_pb2.GetMemoryStatusRequest(device_id=-1)
            with self.assertRaises(grpc.RpcError) as caught:
                admin.GetMemoryStatus(request)
            self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
            with self.assertRaises(grpc.RpcError) as caught:
                admin.Reclaim(admin_pb2.ReclaimRequest(), metadata=[("authorization", "Bearer x")])
            self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
            admin.GetMemoryStatus(request, metadata=[("authorization", "Bearer t0ken")])
            code, log = daemon.stop()
            self.assertEqual(code, 0, log)
        finally:
            daemon.kill()
            os.unlink(f.name)


if __name__ == "__main__":
    unittest.main()
