"""Event delivery: commit → consumer latency and sustained throughput (not part of the test suite).

A fresh embedded PostgreSQL, migrated; ingest's real gRPC server (``wire`` with its PostgreSQL
adapters; no workers, the embedder and content-index are not needed) on a free port. Writers in
two processes (two ingest replicas' worth, a pool each) publish events through ``adapters.outbox.publish`` in
their own transactions (``--per-tx`` events each: 1 is the worst case, a commit per event) at
``--rate`` events/s for ``--seconds``; two consumers, each in its own process, watch the tenant with
``WatchEvents`` over gRPC. Latency is each event's commit (the writer's clock after COMMIT returned) to its arrival at
a consumer. The baseline, measured in the same run, is a bare LISTEN/NOTIFY: a commit to the
notification reaching an asyncpg listener, the floor of any push delivery from PostgreSQL.

    .venv/bin/python bench/events.py [--rate 1200] [--seconds 10] [--per-tx 1] [--writers 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import tempfile
import time
from pathlib import Path

import asyncpg
import grpc
from knowledge.v1 import ingest_pb2, ingest_pb2_grpc
from knowledge_ingest.adapters.outbox import publish
from knowledge_ingest.api.servicer import service_spec
from knowledge_ingest.bootstrap import wire
from knowledge_ingest.config import IngestSettings
from knowledge_ingest.domain.events import EventType, NewEvent
from knowledge_runtime.auth import TokenVerifier
from knowledge_runtime.db.embedded import start_embedded
from knowledge_runtime.db.migrate import migrate
from knowledge_runtime.db.pool import Database
from knowledge_runtime.devkeys import ensure_dev_keys, mint_dev_token
from knowledge_runtime.logging import configure_logging
from knowledge_runtime.server import GrpcApp
from knowledge_runtime.settings import DEFAULT_JWT_AUDIENCE, DEFAULT_JWT_ISSUER, Env

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


async def commit_baseline(url: str, seconds: float = 3.0, connections: int = 16) -> float:
    """Commits per second of a one-row INSERT on ``connections`` connections: the machine's ceiling
    for one-event transactions, whatever the outbox does."""
    pool = await asyncpg.create_pool(url, min_size=connections, max_size=connections)
    await pool.execute("CREATE TABLE IF NOT EXISTS bench_commits (x int)")
    done = 0

    async def loop() -> None:
        nonlocal done
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            async with pool.acquire() as connection, connection.transaction():
                await connection.execute("INSERT INTO bench_commits VALUES (1)")
            done += 1

    await asyncio.gather(*(loop() for _ in range(connections)))
    await pool.close()
    return done / seconds


async def consume(
    stub, metadata, after: str, total: int, arrivals: dict[str, float], order: list[int], ready: Path
) -> None:
    call = stub.WatchEvents(ingest_pb2.WatchEventsRequest(after=after), metadata=metadata)
    async for event in call:
        if event.type == EventType.HEARTBEAT:
            ready.touch()
            continue
        arrivals[event.event_id] = time.time()
        order.append(int(event.cursor))
        if len(arrivals) >= total:
            call.cancel()
            return


async def consumer(address: str, token: str, total: int, ready: Path) -> tuple[dict[str, float], list[int]]:
    arrivals: dict[str, float] = {}
    order: list[int] = []
    async with grpc.aio.insecure_channel(address) as channel:
        stub = ingest_pb2_grpc.IngestServiceStub(channel)
        await consume(stub, [("authorization", f"Bearer {token}")], "", total, arrivals, order, ready)
    return arrivals, order


def consumer_process(address: str, token: str, total: int, out: str) -> None:
    """One consumer in its own process (another service of the platform)."""
    arrivals, order = asyncio.run(consumer(address, token, total, Path(out + ".ready")))
    Path(out).write_text(json.dumps({"arrivals": arrivals, "order": order}))


async def write(db: Database, count: int, per_tx: int, interval_s: float, commits: dict[str, float]) -> None:
    """``count`` transactions of ``per_tx`` events, paced to one every ``interval_s``."""
    start = time.perf_counter()
    for i in range(count):
        delay = start + i * interval_s - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        async with db.transaction() as tx:
            ids = await publish(tx, TENANT, [NewEvent(EventType.DOCUMENT_MOVED, i, 1)] * per_tx)
        committed = time.time()
        for event_id in ids:
            commits[str(event_id)] = committed


async def replica_writers(url: str, writers: int, count: int, per_tx: int, interval_s: float) -> dict[str, float]:
    db = await Database.connect(url, max_size=writers)
    commits: dict[str, float] = {}
    try:
        await asyncio.gather(*(write(db, count, per_tx, interval_s, commits) for _ in range(writers)))
    finally:
        await db.close()
    return commits


def writer_process(url: str, writers: int, count: int, per_tx: int, interval_s: float, out: str) -> None:
    """One ingest replica's worth of writers, in its own process (its own core, its own pool)."""
    commits = asyncio.run(replica_writers(url, writers, count, per_tx, interval_s))
    Path(out).write_text(json.dumps(commits))


async def wait_watching(paths: list[Path], timeout_s: float = 120) -> None:
    """Until every consumer has had its first heartbeat: its stream is open and subscribed."""
    deadline = time.monotonic() + timeout_s
    while not all(path.exists() for path in paths):
        assert time.monotonic() < deadline, "the consumers did not start"
        await asyncio.sleep(0.05)


async def main(options: argparse.Namespace) -> None:
    configure_logging("bench", "warning")
    tmp = Path(tempfile.mkdtemp(prefix="bench-events-"))
    jwks = ensure_dev_keys(tmp / "keys")
    pg = start_embedded(tmp)
    await migrate(pg.url(), embedding_dimension=384)
    baseline = await notify_baseline(pg.url())
    ceiling = await commit_baseline(pg.url())

    settings = IngestSettings.from_env(
        Env(
            {
                "KNOWLEDGE_DATA_DIR": str(tmp),
                "KNOWLEDGE_JWKS_PATH": str(jwks),
                "KNOWLEDGE_INGEST_WORKERS": "0",
                "KNOWLEDGE_EVENTS_HEARTBEAT_S": "0.2",
            }
        )
    )
    served = await Database.connect(pg.url(user="knowledge_ingest"), max_size=6)
    servicer, workers = wire(settings, served, None, None, None)  # type: ignore[arg-type]  # no job runs
    app = GrpcApp(
        services=[service_spec(servicer)],
        verifier=TokenVerifier.from_file(jwks, issuer=DEFAULT_JWT_ISSUER, audience=DEFAULT_JWT_AUDIENCE),
        on_start=[workers.start],
        on_stop=[workers.stop],
    )
    port = await app.start()
    await served.execute("tenant", "INSERT INTO tenants (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING", TENANT)
    transactions = int(options.rate * options.seconds / options.per_tx)
    per_writer = transactions // (2 * options.writers)
    total = per_writer * 2 * options.writers * options.per_tx
    interval_s = 2 * options.writers * options.per_tx / options.rate  # each writer's pace
    commits: dict[str, float] = {}
    arrivals: list[dict[str, float]] = []
    orders: list[list[int]] = []
    try:
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
                target=writer_process, args=(url, options.writers, per_writer, options.per_tx, interval_s, out)
            )
            for out in outs
        ]
        for process in replicas:
            process.start()
        for process in (*replicas, *consumers):
            await asyncio.to_thread(process.join, 180)
            assert process.exitcode == 0, "a writer or consumer process failed"
        for out in outs:
            commits.update(json.loads(Path(out).read_text()))
        for out in watched:
            result = json.loads(Path(out).read_text())
            arrivals.append(result["arrivals"])
            orders.append(result["order"])
    finally:
        await app.stop()
        await served.close()
        pg.stop()

    # Windows on the commits' clock: from the first commit, so the writer processes' start is not counted.
    first = min(commits.values())
    written_s = max(commits.values()) - first
    delivered_s = max(t for seen in arrivals for t in seen.values()) - first
    print(
        f"== events: {total} events, {options.per_tx} per transaction, 2 writer processes (replicas) x {options.writers} writers, "
        f"2 consumers over gRPC WatchEvents"
    )
    print(f"written:   {total / written_s:,.0f} events/s ({written_s:.1f} s; asked {options.rate:,.0f}/s)")
    print(
        f"delivered: {total / delivered_s:,.0f} events/s to each of 2 consumers ({delivered_s:.1f} s, "
        f"{2 * total / delivered_s:,.0f} events/s in all)"
    )
    print(
        f"baseline: one-row INSERT transactions on 16 connections: {ceiling:,.0f} commits/s "
        f"(writes at {total / written_s / options.per_tx / ceiling:.2f}x of that, in transactions)"
    )
    for i, (seen, order) in enumerate(zip(arrivals, orders)):
        assert order == list(range(1, total + 1)) and set(seen) == set(commits), "a consumer missed an event"
        print(f"consumer {i + 1}: all {len(seen)} events, in order, none twice")
    latencies = [(seen[event_id] - commits[event_id]) * 1000 for seen in arrivals for event_id in seen]
    base50, base95 = percentile(baseline, 50), percentile(baseline, 95)
    p50, p95 = percentile(latencies, 50), percentile(latencies, 95)
    print(f"baseline LISTEN/NOTIFY commit→listener: p50 {base50:.2f} ms, p95 {base95:.2f} ms")
    print(
        f"commit→consumer (WatchEvents):         p50 {p50:.2f} ms, p95 {p95:.2f} ms, "
        f"mean {statistics.fmean(latencies):.2f} ms"
    )
    print(f"ratio to the baseline: p50 {p50 / base50:.1f}x, p95 {p95 / base95:.1f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=1200.0, help="events per second to write")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--per-tx", type=int, default=1, help="events per writing transaction")
    parser.add_argument("--writers", type=int, default=8, help="concurrent writers per pool")
    asyncio.run(main(parser.parse_args()))
