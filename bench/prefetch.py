"""Pre-fetch latency with the embedder running, and with it stopped (not part of the test suite).

The real stack (`knowledge up`: embedded PostgreSQL, the four services, Envoy) on free ports and a
fresh data dir. A platform service token (``system.write``) writes ``--entries`` operational
patterns and user-behaviour entries (POST /texts with ``system_corpus``); then one client asks
POST /prefetch ``--requests`` times in each of three phases:

1. the embedder running: the baseline, measured in the same run;
2. the embedder stopped (SIGSTOP: its port still accepts, nothing answers): the deadline
   (``KNOWLEDGE_PREFETCH_DEADLINE_MS``, default 300) must bound every answer;
3. the embedder killed and kept down (its port refuses): the keyword fallback answers.

Prints p50/p95 per phase (through Envoy, and the service's own ``elapsed_ms``), the share of
degraded and of empty answers, and each p95 against the baseline and against the deadline
(target: the service's p95 with the embedder stopped at the deadline, the client's within the
gateway's and the token checks' few milliseconds more; never an error).

    .venv/bin/python bench/prefetch.py [--entries 200] [--requests 200] [--set PREFETCH_DEADLINE_MS=300]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from knowledge_runtime import registry
from knowledge_runtime.auth import PUBLIC_CAPABILITIES
from knowledge_runtime.devkeys import mint_dev_token
from knowledge_runtime.system_corpora import SYSTEM_WRITE

BIN = Path(sys.executable).parent
TOPICS = ["billing", "invoices", "deploys", "backups", "payroll", "onboarding", "vpn", "printers", "laptops", "alerts"]
MESSAGES = [f"how do I handle {topic} this week?" for topic in TOPICS]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_stack(data_dir: Path, extra: list[str]) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")}
    env.update(
        {
            "KNOWLEDGE_DATA_DIR": str(data_dir),
            "KNOWLEDGE_HTTP_PORT": str(port),
            **{f"KNOWLEDGE_{entry.port_setting}": str(free_port()) for entry in registry.SERVICES},
            "KNOWLEDGE_RATE_LIMIT_RPS": "100000",
            "KNOWLEDGE_RATE_LIMIT_BURST": "100000",
            # Phase 3 keeps the embedder down: the supervisor waits long before it restarts it.
            "KNOWLEDGE_SUPERVISOR_BACKOFF_S": "600",
            "KNOWLEDGE_SUPERVISOR_MAX_BACKOFF_S": "600",
            # Every request computed: a cached answer of the baseline would answer the later phases.
            "KNOWLEDGE_SEARCH_CACHE_TTL_S": "0",
            **{f"KNOWLEDGE_{key}": value for key, _, value in (setting.partition("=") for setting in extra)},
        }
    )
    process = subprocess.Popen(
        [str(BIN / "knowledge"), "up"], env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert process.stdout is not None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if "ready" in line:
            return process, f"http://127.0.0.1:{port}/api/v1/knowledge"
        if process.poll() is not None:
            break
    process.kill()
    raise SystemExit("knowledge up did not get ready")


def embedder_pid(data_dir: Path) -> int:
    status = json.loads((data_dir / "run" / "status.json").read_text())
    return int(status["children"]["embedder"]["pid"])


def seed(client: httpx.Client, entries: int) -> None:
    jobs = []
    for n in range(entries):
        topic = TOPICS[n % len(TOPICS)]
        corpus, about = ("operational_patterns", "") if n % 2 == 0 else ("user_behavior", "bench-user")
        body = {"system_corpus": corpus, "text": f"Pattern {n}: {topic} requests go to the {topic} team.", "title": "e"}
        if about:
            body["about_subject"] = about
        reply = client.post("/texts", json=body)
        reply.raise_for_status()
        jobs.append(reply.json()["job_id"])
    for job in jobs:
        while (state := client.get(f"/ingest/{job}").json()["state"]) != "DOCUMENT_STATE_SEARCHABLE":
            if state in ("DOCUMENT_STATE_FAILED", "DOCUMENT_STATE_CANCELLED"):
                raise SystemExit(f"a seed job ended {state}")
            time.sleep(0.2)


def phase(client: httpx.Client, requests: int) -> tuple[list[float], list[float], int, int, int]:
    """Client-side latencies (through Envoy), the service's own elapsed_ms, degraded, empty, errors."""
    latencies: list[float] = []
    served: list[float] = []
    degraded, empty, errors = 0, 0, 0
    for n in range(requests):
        started = time.perf_counter()
        reply = client.post("/prefetch", json={"user_message": MESSAGES[n % len(MESSAGES)]})
        latencies.append(time.perf_counter() - started)
        if reply.status_code != 200:
            errors += 1
            continue
        answer = reply.json()
        served.append(int(answer.get("elapsed_ms") or 0) / 1000)
        degraded += bool(answer.get("degraded"))
        empty += not answer.get("rendered")
    return latencies, served, degraded, empty, errors


def p(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=200)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a KNOWLEDGE_* setting")
    args = parser.parse_args()
    deadline_ms = next((int(v) for k, _, v in (s.partition("=") for s in args.set) if k == "PREFETCH_DEADLINE_MS"), 300)
    with tempfile.TemporaryDirectory(prefix="prefetch-bench-") as tmp:
        data_dir = Path(tmp)
        process, base = start_stack(data_dir, args.set)
        pid = None
        try:
            keys = data_dir / "keys"
            writer = mint_dev_token(keys, tenant="bench", capabilities=[*PUBLIC_CAPABILITIES, SYSTEM_WRITE])
            reader = mint_dev_token(keys, tenant="bench", subject="bench-user")
            with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {writer}"}, timeout=60) as client:
                seed(client, args.entries)
            results = {}
            with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {reader}"}, timeout=60) as client:
                phase(client, 20)  # warm up
                results["embedder running (baseline)"] = phase(client, args.requests)
                pid = embedder_pid(data_dir)
                os.kill(pid, signal.SIGSTOP)
                results["embedder stopped (SIGSTOP)"] = phase(client, args.requests)
                os.kill(pid, signal.SIGKILL)
                os.kill(pid, signal.SIGCONT)
                pid = None
                time.sleep(1)
                results["embedder killed (port refuses)"] = phase(client, args.requests)
        finally:
            if pid is not None:
                os.kill(pid, signal.SIGCONT)
            process.terminate()
            process.wait(60)
    baseline = p(results["embedder running (baseline)"][0], 95)
    print(f"pre-fetch over {args.entries} entries, {args.requests} requests per phase, deadline {deadline_ms} ms")
    for name, (latencies, served, degraded, empty, errors) in results.items():
        p50, p95 = p(latencies, 50) * 1000, p(latencies, 95) * 1000
        inside = p(served, 95) * 1000 if served else 0.0
        print(
            f"  {name:32s} p50 {p50:7.1f} ms  p95 {p95:7.1f} ms  ({p95 / (baseline * 1000):4.2f}x baseline, "
            f"{p95 / deadline_ms:4.2f}x deadline; in the service p95 {inside:6.1f} ms)  "
            f"degraded {degraded}/{len(latencies)}  empty {empty}  errors {errors}"
        )


if __name__ == "__main__":
    main()
