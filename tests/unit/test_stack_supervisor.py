"""`knowledge up`'s supervisor on real child processes: a dead child is started again after its
backoff, the stack gives up only on one that keeps dying, and what it did is in status.json."""

from __future__ import annotations

import dataclasses
import json
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from knowledge_cli import stack as stack_module
from knowledge_cli.stack import Stack, StartupFailed, _requests_in_flight
from knowledge_cli.stack_settings import RestartPolicy, StackSettings

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


def settings(data_dir: Path, policy: RestartPolicy) -> StackSettings:
    return StackSettings(
        data_dir=data_dir,
        host="127.0.0.1",
        http_port=1,
        admin_port=0,
        ports={},
        database_url="unused",
        embedding_model="unused",
        embedding_model_id="",
        issuer="i",
        audience="a",
        max_upload_bytes=1,
        restart_policy=policy,
    )


def test_the_backoff_doubles_with_recent_deaths_and_gives_up_past_the_limit():
    policy = RestartPolicy(max_restarts=3, window_s=60, backoff_s=0.5, max_backoff_s=1.5)
    assert policy.delay([100.0], 100.0) == 0.5
    assert policy.delay([100.0, 101.0], 101.0) == 1.0
    assert policy.delay([100.0, 101.0, 102.0], 102.0) == 1.5  # capped
    assert policy.delay([100.0, 101.0, 102.0, 103.0], 103.0) is None  # a fourth death within the window
    assert policy.delay([10.0, 11.0, 12.0, 103.0], 103.0) == 0.5  # old deaths are forgotten


def test_requests_in_flight_counts_the_listeners_not_the_admin():
    stats = "http.admin.downstream_rq_active: 1\nhttp.rest.downstream_rq_active: 3\nlistener.x: 9\n"
    assert _requests_in_flight(stats) == 3
    assert _requests_in_flight("http.admin.downstream_rq_active: 1\nhttp.rest.downstream_rq_active: 0\n") == 0


async def supervise_until(stack: Stack, done, timeout: float = 20.0) -> str | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reason = await stack.supervise_once()
        if reason is not None or done():
            return reason
        time.sleep(0.02)
    raise AssertionError("the supervisor did not get there in time")


async def test_a_killed_child_is_restarted_and_reported(tmp_path, capsys):
    stack = Stack(settings(tmp_path, RestartPolicy(max_restarts=3, window_s=60, backoff_s=0.05)))
    child = stack._spawn("search", SLEEPER, {})
    other = stack._spawn("ingest", SLEEPER, {})
    try:
        first = child.process.pid
        child.process.send_signal(signal.SIGKILL)
        child.process.wait()
        assert await supervise_until(stack, lambda: child.restarts == 1) is None
        assert child.process.pid != first and child.process.poll() is None
        assert other.restarts == 0 and other.process.poll() is None
        lines = capsys.readouterr().err.splitlines()
        assert lines == [
            f"knowledge: search exited with status {-signal.SIGKILL}; restarting it in 0.1s",
            f"knowledge: search restarted (pid {child.process.pid})",
        ]
        status = json.loads((tmp_path / "run" / "status.json").read_text())["children"]
        assert status["search"] == {
            "state": "running",
            "pid": child.process.pid,
            "restarts": 1,
            "last_exit_status": -signal.SIGKILL,
        }
        assert status["ingest"]["restarts"] == 0
    finally:
        stack.stop()


async def test_a_child_that_keeps_dying_stops_the_stack(tmp_path):
    stack = Stack(settings(tmp_path, RestartPolicy(max_restarts=2, window_s=60, backoff_s=0.01)))
    child = stack._spawn("embedder", [sys.executable, "-c", "raise SystemExit(3)"], {})
    try:
        reason = await supervise_until(stack, lambda: False)
        assert reason is not None and "embedder exited with status 3, 3 times within 60s" in reason
        assert child.restarts == 2
    finally:
        stack.stop()


@pytest.mark.parametrize("max_restarts", [0])
async def test_no_restarts_allowed_stops_at_the_first_death(tmp_path, max_restarts):
    stack = Stack(settings(tmp_path, RestartPolicy(max_restarts=max_restarts)))
    child = stack._spawn("gateway", [sys.executable, "-c", "pass"], {})
    child.process.wait()
    try:
        assert "gateway exited with status 0, 1 times" in (await stack.supervise_once() or "")
    finally:
        stack.stop()


class GatewayAnswering503(BaseHTTPRequestHandler):
    """Envoy's two faces while an upstream fails its health check: /healthz 503, and the admin's
    /clusters with that host's flags."""

    def do_GET(self):
        if self.path == "/healthz":
            self._answer(503, b"")
        elif self.path == "/clusters":
            self._answer(
                200,
                b"search::127.0.0.1:5001::health_flags::healthy\n"
                b"ingest::127.0.0.1:5002::health_flags::/failed_active_hc\n"
                b"ingest::127.0.0.1:5002::cx_active::0\n",
            )
        else:
            self._answer(200, b"")

    do_POST = do_GET

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


async def test_a_gateway_that_never_gets_ready_names_the_upstreams_envoy_counts_unhealthy(tmp_path, monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), GatewayAnswering503)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    monkeypatch.setattr(stack_module, "START_TIMEOUT_S", 0.5)
    stack = Stack(dataclasses.replace(settings(tmp_path, RestartPolicy()), http_port=port))
    stack._spawn("gateway", SLEEPER, {})
    stack.run_dir.mkdir(parents=True, exist_ok=True)
    stack.admin_address_path.write_text(f"127.0.0.1:{port}")
    try:
        with pytest.raises(StartupFailed) as failed:
            await stack._wait_gateway()
        message = str(failed.value)
        assert "the gateway did not answer in time (last: 503" in message
        assert "upstreams not healthy: ingest::127.0.0.1:5002::health_flags::/failed_active_hc" in message
        assert "5001" not in message  # a healthy host is not named
    finally:
        stack.stop()
        server.shutdown()
