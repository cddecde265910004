"""Event delivery: commit → consumer latency and sustained throughput (not part of the test suite).

A fresh embedded PostgreSQL, migrated; ingest's real gRPC server (``wire`` with its PostgreSQL
adapters; no workers, the embedder and content-index are not needed) on a free port; a tenant
with two corpora at its root. Writers in two processes (two ingest replicas' worth, a pool each)
make changes at ``--rate`` events/s for ``--seconds``, ``--per-tx`` events per transaction:

- ``--producer move`` (the default): real ingest transactions, ``PostgresDocuments.move`` (what
  ``MoveDocuments`` runs) moving ``--per-tx`` documents of the writer between the two corpora —
  row locks, the documents' update, the live list's and the search cache's triggers and one
  ``document.moved`` event per document, in one transaction;
- ``--producer publish``: bare transactions of ``adapters.outbox.publish`` alone (the outbox's
  own cost; 1 per transaction is the worst case, a commit per event).

Two consumers, each in its own process, watch the tenant with ``WatchEvents`` over gRPC, with a
token whose reach includes both corpora (every event is judged by the reach rule, none skipped).
Latency is each event's commit (the writer's clock after COMMIT returned) to its arrival at a
consumer. **Sustained** means: the writers held the asked rate (≥ 95 %) for the whole run, every
event reached both consumers in order, and the lag stayed bounded — the p95 latency of each
10-second window stays under ``--max-lag-s`` and the last window is no worse than twice the
first (a backlog grows window after window). Baselines measured in the same run: a bare
LISTEN/NOTIFY (commit to an asyncpg listener, the floor of any push delivery from PostgreSQL),
and the commit rate of one-row INSERT transactions on 16 connections with and without a NOTIFY
in each (PostgreSQL serialises the commits of notifying transactions: a global lock is held from
the NOTIFY's queueing through the commit's WAL flush, so they cannot share an fsync).

    .venv/bin/python bench/events.py [--rate 1000] [--seconds 30] [--per-tx 10] [--producer move|publish] [--writers 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import asyncpg
import grpc
from knowledge.v1 import ingest_pb2
from knowledge_ingest.documents.postgres import PostgresDocuments
from knowledge_ingest.domain.events import EventType, NewEvent
from knowledge_ingest.events.outbox import publish
from knowledge_runtime.auth import TokenVerifier
from knowledge_runtime.db.embedded import start_embedded
from knowledge_runtime.db.migrate import migrate
from knowledge_runtime.db.pool import Database
from knowledge_runtime.devkeys import ensure_dev_keys, mint_dev_token
from knowledge_runtime.logging import configure_logging
from knowledge_runtime.settings import DEFAULT_JWT_AUDIENCE, DEFAULT_JWT_ISSUER

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' ingest server and call metadata
from tests.support import rpc
from tests.support.ingest import replica
from tests.support.net import free_port

TENANT = "bench-events"


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def notify_baseline(url: str, rounds: int = 300) -> list[float]:
    """Commit → NOTIFY arrival at a listener, in ms."""
    listener, sender = await asyncpg.connect(url), await asyncpg.connect(url)
    arrived: asyncio.Queue[float] = asyncio.Queue()
    await listener.add_listener("bench", lambda *_: arrived.put_nowait(time.time()))
    latencies = []
    for _ in range(rounds):
        async with sender.transaction():
            await sender.execute("SELECT pg_notify('bench', 'x')")
        committed = time.time()
        latencies.append((await arrived.get() - committed) * 1000)
    await listener.close()
    await sender.close()
    return latencies


async def commit_baseline(url: str, notify: bool, seconds: float = 3.0, connections: int = 16) -> float:
    """Commits per second of a one-row INSERT (with a NOTIFY in each when ``notify``) on
    ``connections`` connections: the machine's ceiling for one-change transactions."""
    pool = await asyncpg.create_pool(url, min_size=connections, max_size=connections)
    await pool.execute("CREATE TABLE IF NOT EXISTS bench_commits (x int)")
    statement = (
        "WITH i AS (INSERT INTO bench_commits VALUES (1)) SELECT pg_notify('bench', '')"
        if notify
        else ("INSERT INTO bench_commits VALUES (1)")
    )
    done = 0

    async def loop() -> None:
        nonlocal done
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            async with pool.acquire() as connection, connection.transaction():
                await connection.execute(statement)
            done += 1

    await asyncio.gather(*(loop() for _ in range(connections)))
    await pool.close()
    return done / seconds


def key(document_id: int, round_: int) -> str:
    """An event's identity across writer and consumer: the document's n-th change."""
    return f"{document_id}:{round_}"


async def consume(stub, metadata, total: int, arrivals: dict[str, float], order: list[int], ready: Path) -> None:
    rounds: dict[str, int] = {}
    call = stub.WatchEvents(ingest_pb2.WatchEventsRequest(after=""), metadata=metadata)
    async for event in call:
        if event.type == EventType.HEARTBEAT:
            ready.touch()
            continue
        arrived = time.time()
        n = rounds.get(event.document_id, 0)
        rounds[event.document_id] = n + 1
        arrivals[key(int(event.document_id), n)] = arrived
        order.append(int(event.cursor))
        if len(arrivals) >= total:
            call.cancel()
            return


async def consumer(address: str, token: str, total: int, ready: Path) -> tuple[dict[str, float], list[int]]:
    arrivals: dict[str, float] = {}
    order: list[int] = []
    async with grpc.aio.insecure_channel(address) as channel:
        stub = rpc.IngestStub(channel)
        await consume(stub, rpc.auth(token), total, arrivals, order, ready)
    return arrivals, order


def consumer_process(address: str, token: str, total: int, out: str) -> None:
    """One consumer in its own process (another service of the platform)."""
    arrivals, order = asyncio.run(consumer(address, token, total, Path(out + ".ready")))
    Path(out).write_text(json.dumps({"arrivals": arrivals, "order": order}))


async def write(
    db: Database, producer: str, documents: list[int], corpora: tuple[int, int], rounds: int, interval_s: float
) -> dict[str, float]:
    """``rounds`` transactions, each changing all of ``documents`` (one event each), paced to one
    every ``interval_s``; the commit time of each event, by its key."""
    commits: dict[str, float] = {}
    moves = PostgresDocuments(db)
    start = time.perf_counter()
    for i in range(rounds):
        delay = start + i * interval_s - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        target = corpora[(i + 1) % 2]  # every document starts in corpora[0]
        if producer == "move":
            moved, _, _ = await moves.move(TENANT, target, documents, None, frozenset(corpora))
            assert moved == sorted(documents)
        else:
            async with db.transaction() as tx:
                await publish(tx, TENANT, [NewEvent(EventType.DOCUMENT_MOVED, d, target) for d in documents])
        committed = time.time()
        for document_id in documents:
            commits[key(document_id, i)] = committed
    return commits


async def replica_writers(
    url: str, producer: str, documents: list[list[int]], corpora: tuple[int, int], rounds: int, interval_s: float
) -> dict[str, float]:
    db = await Database.connect(url, max_size=len(documents))
    commits: dict[str, float] = {}
    try:
        for part in await asyncio.gather(*(write(db, producer, d, corpora, rounds, interval_s) for d in documents)):
            commits.update(part)
    finally:
        await db.close()
    return commits


def writer_process(
    url: str,
    producer: str,
    documents: list[list[int]],
    corpora: tuple[int, int],
    rounds: int,
    interval_s: float,
    out: str,
) -> None:
    """One ingest replica's worth of writers, in its own process (its own core, its own pool)."""
    commits = asyncio.run(replica_writers(url, producer, documents, corpora, rounds, interval_s))
    Path(out).write_text(json.dumps(commits))


async def wait_watching(paths: list[Path], timeout_s: float = 120) -> None:
    """Until every consumer has had its first heartbeat: its stream is open and subscribed."""
    deadline = time.monotonic() + timeout_s
    while not all(path.exists() for path in paths):
        assert time.monotonic() < deadline, "the consumers did not start"
        await asyncio.sleep(0.05)


async def sample(db: Database, stop: asyncio.Event, backlog: list[int], loop_lag_ms: list[float]) -> None:
    """Every 50 ms, in the server's process: committed events the relay has not numbered yet, and
    how late this event loop (the server's: relay, listener, both streams) wakes from a sleep."""
    while not stop.is_set():
        asked = time.perf_counter()
        await asyncio.sleep(0.05)
        loop_lag_ms.append((time.perf_counter() - asked - 0.05) * 1000)
        backlog.append(int(await db.fetchval("backlog", "SELECT count(*) FROM events WHERE seq IS NULL")))


def windows(latencies: list[tuple[float, float]], first: float, width_s: float = 10.0) -> list[tuple[int, float, int]]:
    """(window start s, p95 ms, deliveries) of (commit time, latency ms) pairs, by commit time; a
    short last window (the final commits) is folded into the one before it."""
    grouped: dict[int, list[float]] = {}
    last = max(committed for committed, _ in latencies) - first
    full = max(1, int(last // width_s))
    for committed, latency in latencies:
        grouped.setdefault(min(full - 1, int((committed - first) // width_s)), []).append(latency)
    return [(int(w * width_s), percentile(v, 95), len(v)) for w, v in sorted(grouped.items())]


async def main(options: argparse.Namespace) -> None:
    configure_logging("bench", "warning")
    load_before = os.getloadavg()
    tmp = Path(tempfile.mkdtemp(prefix="bench-events-"))
    jwks = ensure_dev_keys(tmp / "keys")
    pg = start_embedded(tmp)
    try:
        await migrate(pg.url(), embedding_dimension=384)
        baseline = await notify_baseline(pg.url())
        ceiling = await commit_baseline(pg.url(), notify=False)
        notifying = await commit_baseline(pg.url(), notify=True)
        results = await run(options, tmp, jwks, pg)
    finally:
        pg.stop()
    commits, arrivals, orders, total, backlog, loop_lag_ms = results
    load_after = os.getloadavg()

    # Windows on the commits' clock: from the first commit, so the writer processes' start is not counted.
    first = min(commits.values())
    written_s = max(commits.values()) - first
    delivered_s = max(t for seen in arrivals for t in seen.values()) - first
    written_rate = total / written_s
    print(
        f"== events: {total} events, producer {options.producer}, {options.per_tx} per transaction, "
        f"2 writer processes (replicas) x {options.writers} writers, 2 consumers over gRPC WatchEvents"
    )
    print(
        f"load average: {load_before[0]:.1f} before, {load_after[0]:.1f} after "
        f"(1 min; {os.cpu_count()} cores, shared with whatever else runs)"
    )
    print(f"written:   {written_rate:,.0f} events/s ({written_s:.1f} s; asked {options.rate:,.0f}/s)")
    print(
        f"delivered: {total / delivered_s:,.0f} events/s to each of 2 consumers ({delivered_s:.1f} s, "
        f"{2 * total / delivered_s:,.0f} events/s in all); the last event arrived "
        f"{delivered_s - written_s:.2f} s after the last commit"
    )
    print(
        f"baseline: one-row INSERT transactions on 16 connections: {ceiling:,.0f} commits/s, "
        f"{notifying:,.0f} commits/s with a NOTIFY in each ({notifying / ceiling:.2f}x); "
        f"these writes: {written_rate / options.per_tx:,.0f} transactions/s"
    )
    for i, (seen, order) in enumerate(zip(arrivals, orders)):
        assert order == list(range(1, total + 1)) and set(seen) == set(commits), "a consumer missed an event"
        print(f"consumer {i + 1}: all {len(seen)} events, in order, none twice")
    pairs = [(commits[k], (seen[k] - commits[k]) * 1000) for seen in arrivals for k in seen]
    latencies = [latency for _, latency in pairs]
    base50, base95 = percentile(baseline, 50), percentile(baseline, 95)
    p50, p95 = percentile(latencies, 50), percentile(latencies, 95)
    print(f"baseline LISTEN/NOTIFY commit→listener: p50 {base50:.2f} ms, p95 {base95:.2f} ms")
    print(
        f"commit→consumer (WatchEvents):         p50 {p50:.2f} ms, p95 {p95:.2f} ms, "
        f"mean {statistics.fmean(latencies):.2f} ms"
    )
    print(f"ratio to the baseline: p50 {p50 / base50:.1f}x, p95 {p95 / base95:.1f}x")
    print(
        f"where the time goes: committed events not yet numbered by the relay p50 {percentile(backlog, 50)}, "
        f"p95 {percentile(backlog, 95)}, max {max(backlog)}; the server's event loop wakes late by "
        f"p50 {percentile(loop_lag_ms, 50):.1f} ms, p95 {percentile(loop_lag_ms, 95):.1f} ms, max {max(loop_lag_ms):.0f} ms"
    )
    by_window = windows(pairs, first)
    print(
        "commit→consumer p95 per 10 s of commits: "
        + ", ".join(f"from {start} s {p:.0f} ms ({n} deliveries)" for start, p, n in by_window)
    )
    held = written_rate >= 0.95 * options.rate
    bounded = all(p <= options.max_lag_s * 1000 for _, p, _ in by_window) and (
        by_window[-1][1] <= 2 * max(by_window[0][1], 1.0)
    )
    print(
        f"sustained {options.rate:,.0f} events/s for {written_s:.0f} s with 2 consumers: "
        f"{'YES' if held and bounded else 'NO'} (rate held: {held}; lag bounded under {options.max_lag_s} s "
        f"and not growing: {bounded})"
    )


async def run(options: argparse.Namespace, tmp: Path, jwks: Path, pg) -> tuple:
    overrides = {
        "KNOWLEDGE_DATA_DIR": str(tmp),
        "KNOWLEDGE_JWKS_PATH": str(jwks),
        "KNOWLEDGE_INGEST_WORKERS": "0",
        "KNOWLEDGE_EVENTS_HEARTBEAT_S": "0.2",
    }
    verifier = TokenVerifier.from_file(jwks, issuer=DEFAULT_JWT_ISSUER, audience=DEFAULT_JWT_AUDIENCE)
    served = await Database.connect(pg.url(user="knowledge_ingest"), max_size=6)
    port = free_port()  # the consumers, in processes of their own, dial it
    backlog: list[int] = []
    loop_lag_ms: list[float] = []
    try:
        # no blobs, embedder or extraction: no job runs
        async with replica(pg.url(user="knowledge_ingest"), verifier, None, None, db=served, port=port, **overrides):
            await served.execute("tenant", "INSERT INTO tenants (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING", TENANT)
            made = [
                await served.fetchval(
                    "corpus", "INSERT INTO corpora (tenant_id, name) VALUES ($1, $2) RETURNING corpus_id", TENANT, name
                )
                for name in ("from", "to")
            ]
            corpora: tuple[int, int] = (made[0], made[1])
            writers = 2 * options.writers
            ids = [
                r["document_id"]
                for r in await served.fetch(
                    "documents",
                    "INSERT INTO documents (tenant_id, corpus_id, filename, state) "
                    "SELECT $1, $2, 'bench-' || n || '.txt', 'SEARCHABLE' FROM generate_series(1, $3) AS n RETURNING document_id",
                    TENANT,
                    corpora[0],
                    writers * options.per_tx,
                )
            ]
            owned = [ids[w * options.per_tx : (w + 1) * options.per_tx] for w in range(writers)]
            rounds = max(1, int(options.rate * options.seconds / (writers * options.per_tx)))
            total = rounds * writers * options.per_tx
            interval_s = writers * options.per_tx / options.rate  # each writer's pace
            spawn = multiprocessing.get_context("spawn")
            token = mint_dev_token(tmp / "keys", tenant=TENANT)
            watched = [str(tmp / f"arrivals-{i}.json") for i in range(2)]
            consumers = [
                spawn.Process(target=consumer_process, args=(f"127.0.0.1:{port}", token, total, out)) for out in watched
            ]
            for process in consumers:
                process.start()
            await wait_watching([Path(out + ".ready") for out in watched])
            url = pg.url(user="knowledge_ingest")
            outs = [str(tmp / f"commits-{i}.json") for i in range(2)]
            replicas = [
                spawn.Process(
                    target=writer_process,
                    args=(url, options.producer, owned[i::2], corpora, rounds, interval_s, out),
                )
                for i, out in enumerate(outs)
            ]
            for process in replicas:
                process.start()
            stop = asyncio.Event()
            sampling = asyncio.create_task(sample(served, stop, backlog, loop_lag_ms))
            for process in (*replicas, *consumers):
                await asyncio.to_thread(process.join, options.seconds + 300)
                if process.exitcode != 0:
                    for other in (*replicas, *consumers):
                        other.kill()
                    raise AssertionError("a writer or consumer process failed or did not finish")
            stop.set()
            await sampling
            commits: dict[str, float] = {}
            for out in outs:
                commits.update(json.loads(Path(out).read_text()))
            arrivals, orders = [], []
            for out in watched:
                result = json.loads(Path(out).read_text())
                arrivals.append(result["arrivals"])
                orders.append(result["order"])
    finally:
        await served.close()
    return commits, arrivals, orders, total, backlog, loop_lag_ms


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=1000.0, help="events per second to write")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--per-tx", type=int, default=10, help="events (documents changed) per writing transaction")
    parser.add_argument("--producer", choices=("move", "publish"), default="move")
    parser.add_argument("--writers", type=int, default=8, help="concurrent writers per pool")
    parser.add_argument("--max-lag-s", type=float, default=2.0, help="the p95 commit→consumer bound for 'sustained'")
    asyncio.run(main(parser.parse_args()))
