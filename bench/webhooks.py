"""Webhook delivery: commit → acknowledged delivery to two receivers, beside ``GET /events``, in
one run (not part of the test suite).

A fresh embedded PostgreSQL, migrated; ingest's real gRPC server and its deliverer (``wire`` with
its PostgreSQL adapters, no job workers) on a free port; a tenant with two corpora at its root
and two webhooks, each to its own receiver: an HTTP server on 127.0.0.1 (under
KNOWLEDGE_WEBHOOK_ALLOW_HOSTS) in a process of its own that verifies every request with the
``standardwebhooks`` library and answers 200. Writers in two processes publish ``document.moved``
events (bare outbox transactions, ``--per-tx`` events each) at ``--rate`` events/s for
``--seconds``; a ``WatchEvents`` consumer in another process is the baseline measured in the same
run (``bench/events.py``'s consumer). Latency is an event's commit to its receipt. **Sustained**:
the writers held the rate (≥ 95 %), both receivers got every event, verified and in order, and
the p95 commit→delivery stayed under ``--max-lag-s``.

    .venv/bin/python bench/webhooks.py [--rate 200] [--seconds 60] [--per-tx 5] [--writers 2]
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from knowledge.v1 import ingest_pb2
from knowledge_runtime.auth import TokenVerifier
from knowledge_runtime.db.embedded import start_embedded
from knowledge_runtime.db.migrate import migrate
from knowledge_runtime.db.pool import Database
from knowledge_runtime.devkeys import ensure_dev_keys, mint_dev_token
from knowledge_runtime.logging import configure_logging
from knowledge_runtime.settings import DEFAULT_JWT_AUDIENCE, DEFAULT_JWT_ISSUER

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' ingest server
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/events.py: its writers and consumer
from events import TENANT, consumer_process, key, percentile, wait_watching, writer_process

from tests.support import rpc
from tests.support.ingest import replica
from tests.support.net import free_port


def receivers_process(ports: list[int], secrets: list[str], total: int, out: str, limit_s: float) -> None:
    """Two receivers; each records (webhook-id, document_id, arrival) of every request and whether
    it verified; stops once both have ``total`` distinct events or ``limit_s`` passed."""
    from standardwebhooks import Webhook
    from standardwebhooks.webhooks import WebhookVerificationError

    records: list[list[tuple[str, str, float]]] = [[] for _ in ports]
    unverified = [0 for _ in ports]
    seen: list[set[str]] = [set() for _ in ports]
    lock = threading.Lock()

    def handler_for(index: int):
        verifier = Webhook(secrets[index])

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                arrived = time.time()
                try:
                    event = verifier.verify(body, dict(self.headers.items()))
                except WebhookVerificationError:
                    event = None
                with lock:
                    if event is None:
                        unverified[index] += 1
                    else:
                        records[index].append((self.headers["webhook-id"], str(event["document_id"]), arrived))
                        seen[index].add(self.headers["webhook-id"])
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        return Handler

    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", port), handler_for(i)) for i, port in enumerate(ports)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    Path(out + ".ready").touch()
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and not all(len(s) >= total for s in seen):
        time.sleep(0.1)
    for server in servers:
        server.shutdown()
    Path(out).write_text(json.dumps({"records": records, "unverified": unverified}))


def by_round(records: list[tuple[str, str, float]]) -> tuple[dict[str, float], int, bool]:
    """The first arrival of each event by its writer's key (a document's n-th event), the repeats,
    and whether every document's events came in order (each event's first arrival)."""
    firsts: dict[str, float] = {}
    rounds: dict[str, int] = {}
    counted: set[str] = set()
    repeats = 0
    for webhook_id, document_id, arrived in records:
        if webhook_id in counted:
            repeats += 1
            continue
        counted.add(webhook_id)
        n = rounds.get(document_id, 0)
        rounds[document_id] = n + 1
        firsts[key(int(document_id), n)] = arrived
    ordered = all(firsts[key(int(d), i)] <= firsts[key(int(d), i + 1)] for d, n in rounds.items() for i in range(n - 1))
    return firsts, repeats, ordered


async def run(options: argparse.Namespace, tmp: Path, jwks: Path, pg) -> tuple:
    ports = [free_port(), free_port()]
    overrides = {
        "KNOWLEDGE_DATA_DIR": str(tmp),
        "KNOWLEDGE_JWKS_PATH": str(jwks),
        "KNOWLEDGE_INGEST_WORKERS": "0",
        "KNOWLEDGE_EVENTS_HEARTBEAT_S": "0.2",
        "KNOWLEDGE_WEBHOOK_ALLOW_HOSTS": ",".join(f"127.0.0.1:{p}" for p in ports),
    }
    verifier = TokenVerifier.from_file(jwks, issuer=DEFAULT_JWT_ISSUER, audience=DEFAULT_JWT_AUDIENCE)
    url = pg.url(user="knowledge_ingest")
    served = await Database.connect(url, max_size=8)
    port = free_port()
    spawn = multiprocessing.get_context("spawn")
    try:
        async with replica(url, verifier, None, None, db=served, port=port, **overrides) as stub:
            await served.execute("tenant", "INSERT INTO tenants (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING", TENANT)
            corpora = tuple(
                [
                    await served.fetchval(
                        "corpus", "INSERT INTO corpora (tenant_id, name) VALUES ($1, $2) RETURNING corpus_id", TENANT, n
                    )
                    for n in ("from", "to")
                ]
            )
            writers = 2 * options.writers
            ids = [
                r["document_id"]
                for r in await served.fetch(
                    "documents",
                    "INSERT INTO documents (tenant_id, corpus_id, filename, state) SELECT $1, $2, 'b-' || n || '.txt', "
                    "'SEARCHABLE' FROM generate_series(1, $3) AS n RETURNING document_id",
                    TENANT,
                    corpora[0],
                    writers * options.per_tx,
                )
            ]
            owned = [ids[w * options.per_tx : (w + 1) * options.per_tx] for w in range(writers)]
            rounds = max(1, int(options.rate * options.seconds / (writers * options.per_tx)))
            total = rounds * writers * options.per_tx
            interval_s = writers * options.per_tx / options.rate
            capabilities = ["corpus.read", "webhooks.admin"]
            token = mint_dev_token(tmp / "keys", tenant=TENANT, capabilities=capabilities)
            secrets = []
            for p in ports:
                created = await stub.CreateWebhook(
                    ingest_pb2.CreateWebhookRequest(url=f"http://127.0.0.1:{p}/hook"), metadata=rpc.auth(token)
                )
                secrets.append(created.secret)
            received = str(tmp / "received.json")
            receiving = spawn.Process(
                target=receivers_process, args=(ports, secrets, total, received, options.seconds + 300)
            )
            receiving.start()
            watched = str(tmp / "watched.json")
            watching = spawn.Process(target=consumer_process, args=(f"127.0.0.1:{port}", token, total, watched))
            watching.start()
            await wait_watching([Path(received + ".ready"), Path(watched + ".ready")])
            outs = [str(tmp / f"commits-{i}.json") for i in range(2)]
            writing = [
                spawn.Process(
                    target=writer_process, args=(url, "publish", owned[i::2], corpora, rounds, interval_s, out)
                )
                for i, out in enumerate(outs)
            ]
            for process in writing:
                process.start()
            for process in (*writing, watching, receiving):
                await asyncio.to_thread(process.join, options.seconds + 400)
                if process.exitcode != 0:
                    for other in (*writing, watching, receiving):
                        other.kill()
                    raise AssertionError("a writer, the consumer or the receivers failed")
            commits: dict[str, float] = {}
            for out in outs:
                commits.update(json.loads(Path(out).read_text()))
    finally:
        await served.close()
    return commits, json.loads(Path(watched).read_text()), json.loads(Path(received).read_text()), total


async def main(options: argparse.Namespace) -> None:
    configure_logging("bench", "warning")
    load_before = os.getloadavg()
    tmp = Path(tempfile.mkdtemp(prefix="bench-webhooks-"))
    jwks = ensure_dev_keys(tmp / "keys")
    pg = start_embedded(tmp)
    try:
        await migrate(pg.url(), embedding_dimension=384)
        commits, watched, received, total = await run(options, tmp, jwks, pg)
    finally:
        pg.stop()
    first = min(commits.values())
    written_s = max(commits.values()) - first
    written_rate = total / written_s
    print(f"== webhooks: {total} events, {options.per_tx} per transaction, 2 receivers and 1 WatchEvents consumer")
    print(f"load average: {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after ({os.cpu_count()} cores)")
    print(f"written: {written_rate:,.0f} events/s ({written_s:.1f} s; asked {options.rate:,.0f}/s)")
    watch = [(watched["arrivals"][k] - commits[k]) * 1000 for k in watched["arrivals"]]
    print(
        f"commit→WatchEvents (baseline): all {len(watch)} in order "
        f"{watched['order'] == list(range(1, total + 1))}; p50 {percentile(watch, 50):.1f} ms, "
        f"p95 {percentile(watch, 95):.1f} ms"
    )
    sustained = written_rate >= 0.95 * options.rate
    for i, records in enumerate(received["records"]):
        firsts, repeats, ordered = by_round(records)
        latencies = [(firsts[k] - commits[k]) * 1000 for k in firsts if k in commits]
        complete = set(firsts) == set(commits) and received["unverified"][i] == 0
        p95 = percentile(latencies, 95) if latencies else float("inf")
        print(
            f"receiver {i + 1}: {len(firsts)}/{total} events, verified {received['unverified'][i] == 0}, "
            f"in order {ordered}, repeats {repeats}; commit→delivery p50 {percentile(latencies, 50):.1f} ms, "
            f"p95 {p95:.1f} ms, mean {statistics.fmean(latencies):.1f} ms "
            f"({p95 / max(percentile(watch, 95), 0.001):.1f}x WatchEvents' p95)"
        )
        sustained = sustained and complete and ordered and p95 <= options.max_lag_s * 1000
    print(
        f"sustained {options.rate:,.0f} events/s to 2 receivers, p95 ≤ {options.max_lag_s} s: {'YES' if sustained else 'NO'}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=200.0, help="events per second to write")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--per-tx", type=int, default=5, help="events per writing transaction")
    parser.add_argument("--writers", type=int, default=2, help="writers per writer process")
    parser.add_argument("--max-lag-s", type=float, default=1.0, help="the p95 commit→delivery bound for 'sustained'")
    asyncio.run(main(parser.parse_args()))
