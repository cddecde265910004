"""Interactive latency under bulk ingestion (not part of the test suite).

The real stack (`knowledge up`: embedded PostgreSQL, the four services, Envoy) on free ports and a
fresh data dir. A corpus is seeded with SciFact abstracts (``../shared/datasets/scifact-train``,
skipped when absent), then, in one run:

1. idle: ``--clients`` concurrent clients search (REST through Envoy, hybrid, SciFact claims as
   queries) for ``--seconds``;
2. during a bulk ingest: ``--docs`` documents of ``--abstracts`` abstracts each are uploaded, and
   once their jobs are embedding the same clients search again for ``--seconds``;
3. then ``--seconds`` more with no searches, to compare ingestion's pace with and without them.

Prints p50/p95 of both windows and their ratio (the idle window is the baseline, measured in the
same run; target: p95 during ingest ≤ 2× idle), and the chunks embedded during the second window
against the third (ingestion must still progress: queries go first, bounded). Chunks count in
steps of ``KNOWLEDGE_INGEST_EMBED_BATCH`` (32), so use windows of 20 s or more.

    .venv/bin/python bench/latency.py [--clients 20] [--seconds 20] [--docs 5] [--abstracts 200] \
        [--set BULK_BATCH_TOKENS=512 ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
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

REPO = Path(__file__).resolve().parent.parent
DATASET = REPO.parent / "shared" / "datasets" / "scifact-train"
BIN = Path(sys.executable).parent


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
            # The benchmark's clients are one tenant: no rate limit in the way of what is measured.
            "KNOWLEDGE_RATE_LIMIT_RPS": "100000",
            "KNOWLEDGE_RATE_LIMIT_BURST": "100000",
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


def abstracts() -> list[str]:
    with open(DATASET / "corpus.jsonl") as handle:
        return [f"{row['title']}\n\n{row['text']}\n" for row in map(json.loads, handle)]


def claims() -> list[str]:
    with open(DATASET / "queries.jsonl") as handle:
        return [row["text"] for row in map(json.loads, handle)]


async def upload(client: httpx.AsyncClient, corpus: str, name: str, text: str) -> str:
    reply = await client.post(
        "/upload",
        params={"corpus_id": corpus, "filename": name},
        content=text.encode(),
        headers={"Content-Type": "text/plain"},
    )
    reply.raise_for_status()
    return reply.json()["job_id"]


def embedded(job: dict, totals: dict[str, int]) -> int:
    """Chunks a job has embedded so far: its stage reads "embedding k/n" while it embeds."""
    stage = job.get("stage", "")
    if stage.startswith("embedding ") and "/" in stage:
        done, total = (int(part) for part in stage.split(" ", 1)[1].split("/"))
        totals[job["job_id"]] = total
        return done
    if job["state"] in ("DOCUMENT_STATE_STORING", "DOCUMENT_STATE_SEARCHABLE"):
        return totals.get(job["job_id"]) or int(job.get("result", {}).get("chunk_count", 0))
    return 0


async def job_states(client: httpx.AsyncClient, jobs: list[str]) -> list[dict]:
    return [(await client.get(f"/ingest/{job}")).json() for job in jobs]


async def wait_searchable(client: httpx.AsyncClient, jobs: list[str]) -> None:
    while True:
        states = [s["state"] for s in await job_states(client, jobs)]
        if all(state == "DOCUMENT_STATE_SEARCHABLE" for state in states):
            return
        if any(state in ("DOCUMENT_STATE_FAILED", "DOCUMENT_STATE_CANCELLED") for state in states):
            raise SystemExit(f"an ingestion job ended {states}")
        await asyncio.sleep(0.5)


async def search_window(client: httpx.AsyncClient, queries: list[str], clients: int, seconds: float) -> list[float]:
    latencies: list[float] = []
    errors = 0
    end = time.monotonic() + seconds

    async def one_client(offset: int) -> None:
        nonlocal errors
        index = offset
        while time.monotonic() < end:
            query = queries[index % len(queries)]
            index += clients
            started = time.perf_counter()
            reply = await client.post("/search", json={"query": query, "top_k": 10})
            if reply.status_code == 200:
                latencies.append(time.perf_counter() - started)
            else:
                errors += 1

    await asyncio.gather(*(one_client(i) for i in range(clients)))
    if errors:
        print(f"  ({errors} searches failed)")
    return latencies


def p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]


async def run(args: argparse.Namespace, base: str, token: str) -> None:
    texts, queries = abstracts(), claims()
    seed, bulk = texts[:300], texts[300 : 300 + args.docs * args.abstracts]
    limits = httpx.Limits(max_connections=args.clients + 4, max_keepalive_connections=args.clients + 4)
    async with httpx.AsyncClient(
        base_url=base, timeout=120, limits=limits, headers={"Authorization": f"Bearer {token}"}
    ) as client:
        corpus = (await client.post("/corpora", json={"name": "SciFact"})).json()["corpus_id"]
        await wait_searchable(client, [await upload(client, corpus, "seed.txt", "\n".join(seed))])
        await search_window(client, queries, args.clients, 3)  # warm-up

        idle = await search_window(client, queries, args.clients, args.seconds)

        jobs = [
            await upload(
                client, corpus, f"bulk-{i}.txt", "\n".join(bulk[i * args.abstracts : (i + 1) * args.abstracts])
            )
            for i in range(args.docs)
        ]
        while not any(s["state"] == "DOCUMENT_STATE_EMBEDDING" for s in await job_states(client, jobs)):
            await asyncio.sleep(0.2)
        before = await job_states(client, jobs)
        busy = await search_window(client, queries, args.clients, args.seconds)
        after = await job_states(client, jobs)
        await asyncio.sleep(args.seconds)  # the same window with no searches: ingestion's own pace
        alone = await job_states(client, jobs)
        totals: dict[str, int] = {}
        with_searches = sum(embedded(a, totals) - embedded(b, totals) for a, b in zip(after, before))
        without = sum(embedded(a, totals) - embedded(b, totals) for a, b in zip(alone, after))
        still = sum(s["state"] != "DOCUMENT_STATE_SEARCHABLE" for s in alone)

    idle50, idle95, busy50, busy95 = p(idle, 50), p(idle, 95), p(busy, 50), p(busy, 95)
    print(f"search through Envoy, {args.clients} concurrent clients, {args.seconds:g} s windows")
    print(f"  idle:                 p50 {idle50 * 1000:7.0f} ms  p95 {idle95 * 1000:7.0f} ms  ({len(idle)} searches)")
    print(f"  during a bulk ingest: p50 {busy50 * 1000:7.0f} ms  p95 {busy95 * 1000:7.0f} ms  ({len(busy)} searches)")
    print(f"  ratio (ingest ÷ idle): p50 {busy50 / idle50:.2f}  p95 {busy95 / idle95:.2f}  (target p95 ≤ 2)")
    print(
        f"  ingestion: {with_searches} chunks embedded during the searches, {without} in the same time "
        f"without them ({with_searches / max(without, 1):.2f}); {still} of {args.docs} jobs still running"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--docs", type=int, default=5)
    parser.add_argument("--abstracts", type=int, default=200, help="abstracts per bulk document")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a KNOWLEDGE_NAME setting for the stack, e.g. BULK_BATCH_TOKENS=512",
    )
    args = parser.parse_args()
    if not (DATASET / "corpus.jsonl").is_file():
        print(f"skipped: the SciFact development set is not at {DATASET}")
        return
    with tempfile.TemporaryDirectory(prefix="knowledge-latency-") as scratch:
        data_dir = Path(scratch)
        process, base = start_stack(data_dir, args.set)
        try:
            token = mint_dev_token(data_dir / "keys", tenant="bench")
            asyncio.run(run(args, base, token))
        finally:
            process.terminate()
            process.wait(60)


if __name__ == "__main__":
    main()
