"""`knowledge up`'s supervisor on real child processes: a dead child is started again after its
backoff, the stack gives up only on one that keeps dying, and what it did is in status.json."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

import pytest
from knowledge_cli.stack import Stack, _requests_in_flight
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
