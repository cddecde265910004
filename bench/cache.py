"""The scope-keyed search cache: p50 of the same query cached and uncached (not part of the tests).

The real stack (`knowledge up`: embedded PostgreSQL, the four services with the real model,
Envoy) on free ports and one fresh data dir, started twice over the same data: first with
``KNOWLEDGE_SEARCH_CACHE_TTL_S=0`` (every answer computed: the baseline), then with the default
TTL (30 s). Each run sends the same query ``--requests`` times through the gateway (REST, hybrid)
after a few warm-up requests (in the cached run, the first of those is the one miss), and prints
its p50 and p95. The ratio compares the two runs of this invocation.

    .venv/bin/python bench/cache.py [--requests 200] [--docs 40]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from knowledge_runtime import registry
from knowledge_runtime.devkeys import mint_dev_token

BIN = Path(sys.executable).parent
QUERY = "How long does the heron migration take?"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_stack(data_dir: Path, **settings: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")}
    env.update(
        {
            "KNOWLEDGE_DATA_DIR": str(data_dir),
            "KNOWLEDGE_HTTP_PORT": str(port),
            **{f"KNOWLEDGE_{entry.port_setting}": str(free_port()) for entry in registry.SERVICES},
            "KNOWLEDGE_RATE_LIMIT_RPS": "100000",  # one client of one tenant: no rate limit in the way
            "KNOWLEDGE_RATE_LIMIT_BURST": "100000",
            **{f"KNOWLEDGE_{name}": value for name, value in settings.items()},
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


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:
        process.kill()


def seed(base: str, headers: dict, docs: int) -> None:
    corpus = httpx.post(f"{base}/corpora", headers=headers, json={"name": "birds"}).json()["corpus_id"]
    items = [
        {
            "corpus_id": corpus,
            "title": f"note-{n}.txt",
            "text": f"# Note {n}\n\nField note {n}: the heron colony {n} waits by lake {n % 7}; "
            f"its migration takes {n % 11 + 2} weeks and crosses {n % 5 + 1} valleys. " * 6,
        }
        for n in range(docs)
    ]
    reply = httpx.post(f"{base}/texts:batch", headers=headers, json={"items": items}, timeout=120)
    reply.raise_for_status()
    jobs = [item["job"]["job_id"] for item in reply.json()["items"]]
    deadline = time.monotonic() + 600
    while jobs and time.monotonic() < deadline:
        state = httpx.get(f"{base}/ingest/{jobs[-1]}", headers=headers).json()["state"]
        if state in ("DOCUMENT_STATE_SEARCHABLE", "DOCUMENT_STATE_FAILED", "DOCUMENT_STATE_CANCELLED"):
            jobs.pop()
        else:
            time.sleep(0.2)
    if jobs:
        raise SystemExit("ingestion did not finish")


def timed(base: str, headers: dict, requests: int) -> list[float]:
    seconds = []
    with httpx.Client(headers=headers, timeout=60) as client:
        for _ in range(requests):
            start = time.perf_counter()
            reply = client.post(f"{base}/search", json={"query": QUERY, "top_k": 10})
            seconds.append(time.perf_counter() - start)
            reply.raise_for_status()
    return seconds


def p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] * 1000 if len(values) > 1 else values[0] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--docs", type=int, default=40)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-cache-") as work:
        data_dir = Path(work)
        results = {}
        for label, ttl in (("uncached", "0"), ("cached", "30")):
            process, base = start_stack(data_dir, SEARCH_CACHE_TTL_S=ttl)
            try:
                headers = {"Authorization": f"Bearer {mint_dev_token(data_dir / 'keys', tenant='bench')}"}
                if label == "uncached":
                    seed(base, headers, options.docs)
                timed(base, headers, 5)  # warm the connections, the model and the plans
                results[label] = timed(base, headers, options.requests)
            finally:
                stop(process)
    uncached, cached = results["uncached"], results["cached"]
    for label, values in results.items():
        print(f"{label:9s} p50 {p(values, 50):7.2f} ms  p95 {p(values, 95):7.2f} ms  ({len(values)} requests)")
    print(f"cached / uncached p50: {p(cached, 50) / p(uncached, 50):.2f}")


if __name__ == "__main__":
    main()
