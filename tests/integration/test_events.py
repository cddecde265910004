"""Events through the outbox on real PostgreSQL and a real gRPC server (content-index and the
embedder as fakes at their ports): each change and its event commit together, WatchEvents
delivers a tenant's events in commit order from a cursor, two replicas write without gaps."""

import asyncio
import random
import uuid
from contextlib import asynccontextmanager

import grpc
import pytest
from knowledge.v1 import ingest_pb2
from knowledge_ingest.domain.events import EventType, NewEvent
from knowledge_ingest.events.outbox import OutboxRelay, PostgresEventLog, PostgresWakeups, publish
from knowledge_runtime.auth import Scope
from knowledge_runtime.db.pool import Database, Transaction

from tests.support.ingest import (
    CountingEmbedder,
    MemoryBlobs,
    auth,
    new_corpus,
    replica,
    settings,
    text_extract,
    wait_terminal,
    wire_fakes,
)

pytestmark = pytest.mark.integration


@pytest.fixture
async def parts(migrated_pg):
    admin = await Database.connect(migrated_pg.url())
    yield migrated_pg.url(user="knowledge_ingest"), MemoryBlobs(admin), CountingEmbedder(), admin
    await admin.close()


async def ingest_texts(stub, metadata, corpus_id: str, count: int, tag: str) -> list[str]:
    items = [
        ingest_pb2.IngestTextRequest(corpus_id=corpus_id, text=f"# {tag} {i}\n\nText {tag} number {i}.", title=f"t{i}")
        for i in range(count)
    ]
    reply = await stub.BatchIngestTexts(ingest_pb2.BatchIngestTextsRequest(items=items), metadata=metadata)
    assert reply.accepted_count == count
    return [item.job.job_id for item in reply.items]


async def collect(stub, metadata, after: str, want, timeout: float = 60.0) -> list[ingest_pb2.Event]:
    """Events (heartbeats left out) from the cursor until ``want(events)`` holds."""
    got: list[ingest_pb2.Event] = []
    call = stub.WatchEvents(ingest_pb2.WatchEventsRequest(after=after), metadata=metadata)
    try:
        async with asyncio.timeout(timeout):
            async for event in call:
                if event.type != EventType.HEARTBEAT:
                    got.append(event)
                    if want(got):
                        return got
    finally:
        call.cancel()
    raise AssertionError("the stream ended")


def searchable_ids(events) -> list[str]:
    return [e.document_id for e in events if e.type == "document.searchable"]


async def test_a_consumer_that_reconnects_with_its_cursor_sees_all_100_exactly_once_in_order(
    parts, verifier, make_token
):
    url, blobs, embedder, _ = parts
    metadata = auth(make_token, "t-events-resume")
    async with replica(url, verifier, blobs, embedder) as stub:
        corpus_id = await new_corpus(stub, metadata)
        first = await collect(stub, metadata, "", lambda got: got[-1].type == "corpus.created")
        cursor = first[-1].cursor
        # The consumer goes away, the 100 ingests happen, then it comes back with its cursor.
        jobs = await ingest_texts(stub, metadata, corpus_id, 100, "resume")
        done = [await wait_terminal(stub, metadata, job) for job in jobs]
        expected = {job.result.document_id for job in done}
        assert len(expected) == 100 and all(j.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE for j in done)
        # Reconnected part-way twice: each time from the last cursor it had.
        seen: list[ingest_pb2.Event] = []
        while len(searchable_ids(seen)) < 100:
            part = await collect(
                stub, metadata, cursor, lambda got, seen=seen: len(got) >= 37 or len(searchable_ids(seen + got)) >= 100
            )
            seen += part
            cursor = part[-1].cursor
    ids = searchable_ids(seen)
    assert sorted(ids) == sorted(expected) and len(set(ids)) == 100  # all 100, none twice
    cursors = [int(e.cursor) for e in first + seen]
    assert cursors == list(range(cursors[0], cursors[0] + len(cursors)))  # in order, no gap, no repeat
    event = next(e for e in seen if e.type == "document.searchable")
    assert event.corpus_id == corpus_id and event.chunk_count == 1 and uuid.UUID(event.event_id)
    assert event.time.seconds > 0
    assert len({e.event_id for e in seen}) == len(seen)


async def test_two_replicas_write_without_gaps_or_reordering_while_a_watcher_reads(parts, verifier, make_token):
    url, blobs, embedder, _ = parts
    metadata = auth(make_token, "t-events-replicas")
    async with (
        replica(url, verifier, blobs, embedder) as one,
        replica(url, verifier, blobs, embedder) as two,
    ):
        corpus_id = await new_corpus(one, metadata)
        start = await collect(one, metadata, "", lambda got: got[-1].type == "corpus.created")
        watcher = asyncio.create_task(
            collect(two, metadata, start[-1].cursor, lambda got: len(searchable_ids(got)) >= 60)
        )
        await asyncio.sleep(0.2)
        # Both replicas take uploads and run workers: 60 documents written by four workers.
        batches = await asyncio.gather(
            *(ingest_texts(stub, metadata, corpus_id, 10, f"r{i}") for i, stub in enumerate([one, two] * 3))
        )
        for stub, jobs in zip([one, two] * 3, batches):
            for job in jobs:
                await wait_terminal(stub, metadata, job)
        live = await watcher
    cursors = [int(e.cursor) for e in live]
    assert cursors == list(range(int(start[-1].cursor) + 1, int(start[-1].cursor) + 1 + len(live)))
    assert len(set(searchable_ids(live))) == 60


async def test_concurrent_publishers_on_two_pools_leave_no_gap_a_live_reader_could_skip(migrated_pg):
    """Transactions that publish and then hold their commit a moment (a slow commit), on two pools
    at once, each pool with its relay: a reader polling all the while sees every sequence number
    once, in order, and every event written."""
    tenant = "t-events-race"
    pools = [await Database.connect(migrated_pg.url(user="knowledge_ingest"), max_size=8) for _ in range(2)]
    log = PostgresEventLog(pools[0])
    wakeups = [PostgresWakeups(db) for db in pools]
    relays = [OutboxRelay(PostgresEventLog(db), w, poll_s=0.05) for db, w in zip(pools, wakeups)]
    for part in (*wakeups, *relays):
        await part.start()
    await pools[0].execute("t", "INSERT INTO tenants (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING", tenant)
    written: list[uuid.UUID] = []
    total = 12 * 15 * 2

    async def writer(db: Database, n: int) -> None:
        for i in range(n):
            async with db.transaction() as tx:
                events = [NewEvent(EventType.DOCUMENT_MOVED, i, 1), NewEvent(EventType.CORPUS_CREATED)]
                ids = await publish(tx, tenant, events)
                await asyncio.sleep(random.random() * 0.01)  # the commit comes late
            written.extend(ids)

    async def reader() -> list[tuple[int, uuid.UUID]]:
        seen, position = [], 0
        async with asyncio.timeout(60):
            while len(seen) < total:
                for event in await log.read_after(tenant, position, 50):
                    seen.append((event.seq, event.event_id))
                    position = event.seq
                await asyncio.sleep(0.001)
        return seen

    try:
        reading = asyncio.create_task(reader())
        await asyncio.gather(*(writer(pools[i % 2], 15) for i in range(12)))
        seen = await reading
        assert [seq for seq, _ in seen] == list(range(1, total + 1))
        assert sorted(event_id for _, event_id in seen) == sorted(written)
        assert await log.bounds(tenant) == (1, total)
    finally:
        for part in (*relays, *wakeups):
            await part.stop()
        for db in pools:
            await db.close()


class KilledAtPublish(Database):
    """The writer's backend is terminated the moment it would write the event: the change's
    statements ran in the transaction, the event's did not."""

    @asynccontextmanager
    async def transaction(self):
        async with super().transaction() as tx:
            yield _Killing(tx._conn)


class _Killing(Transaction):
    async def _call(self, method, name, sql, *args):
        if name == "publish_events":
            await self._conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        return await super()._call(method, name, sql, *args)


async def test_a_writer_killed_between_the_change_and_its_event_leaves_neither(parts, verifier, make_token):
    url, blobs, embedder, admin = parts
    tenant = "t-events-kill"
    metadata = auth(make_token, tenant)
    killed = await KilledAtPublish.connect(url, max_size=4)
    try:
        with pytest.raises(Exception):  # noqa: B017 - the connection is gone, however it says so
            await wire_fakes(settings(), killed, blobs, embedder, text_extract).corpora.create_corpus(
                Scope(tenant=tenant, capabilities=frozenset()), "killed", ""
            )
        assert await admin.fetchval("t", "SELECT count(*) FROM corpora WHERE tenant_id = $1", tenant) == 0
        async with replica(url, verifier, blobs, embedder) as stub:
            corpus_id = await new_corpus(stub, metadata)
        # The worker's final transaction (chunks, document SEARCHABLE, job result) is killed at its
        # event: none of it stays; the job is taken over and ends SEARCHABLE with its one event.
        async with replica(url, verifier, blobs, embedder, db=killed, KNOWLEDGE_INGEST_LEASE_S="1") as stub:
            (job_id,) = await ingest_texts(stub, metadata, corpus_id, 1, "kill")
            await asyncio.sleep(3)
            row = await admin.fetchrow(
                "t",
                "SELECT d.state, (SELECT count(*) FROM chunks c WHERE c.document_id = d.document_id) AS chunks "
                "FROM documents d WHERE d.tenant_id = $1",
                tenant,
            )
            assert row["state"] != "SEARCHABLE" and row["chunks"] == 0
        events = await admin.fetch("t", "SELECT type FROM events WHERE tenant_id = $1 ORDER BY seq", tenant)
        assert [e["type"] for e in events] == ["corpus.created"]
        async with replica(url, verifier, blobs, embedder) as stub:
            job = await wait_terminal(stub, metadata, job_id)
            assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE
        events = await admin.fetch(
            "t", "SELECT type, document_id FROM events WHERE tenant_id = $1 ORDER BY seq", tenant
        )
        assert [e["type"] for e in events] == ["corpus.created", "document.searchable"]
        assert str(events[1]["document_id"]) == job.result.document_id
    finally:
        await killed.close()


async def test_every_change_writes_its_event(parts, verifier, make_token):
    url, blobs, embedder, _ = parts
    metadata = auth(make_token, "t-events-kinds")
    embedder.gate = asyncio.Event()  # jobs wait at the embedder until released
    async with replica(url, verifier, blobs, embedder) as stub:
        source, target = await new_corpus(stub, metadata), await new_corpus(stub, metadata)
        cancelled, kept = await ingest_texts(stub, metadata, source, 2, "kinds")
        await stub.CancelIngestJob(ingest_pb2.CancelIngestJobRequest(job_id=cancelled), metadata=metadata)
        embedder.gate.set()
        cancelled_job = await wait_terminal(stub, metadata, cancelled)
        job = await wait_terminal(stub, metadata, kept)
        document_id = job.result.document_id
        await stub.MoveDocuments(
            ingest_pb2.MoveDocumentsRequest(target_corpus_id=target, document_ids=[document_id]), metadata=metadata
        )
        await stub.DeleteDocument(ingest_pb2.DeleteDocumentRequest(document_id=document_id), metadata=metadata)
        events = await collect(stub, metadata, "", lambda got: got[-1].type == "document.removed")
    kinds = [(e.type, e.corpus_id) for e in events]
    assert kinds[:2] == [("corpus.created", source), ("corpus.created", target)]
    assert ("document.cancelled", source) in kinds and cancelled_job.state == ingest_pb2.DOCUMENT_STATE_CANCELLED
    assert len(kinds) == 6  # nothing else: a queued or running document is not an event
    ends = [k for k in kinds if k[0] != "document.cancelled"][2:]
    assert ends == [("document.searchable", source), ("document.moved", target), ("document.removed", target)]
    moved = events[-2]
    assert moved.from_corpus_id == source and moved.document_id == document_id
    # The cancelled job's event may come before or after the searchable one: find it by type.
    searchable = next(e for e in events if e.type == "document.searchable")
    assert events[-1].chunk_count == searchable.chunk_count == 1


async def test_a_failed_document_event_carries_the_reason(parts, verifier, make_token):
    url, blobs, embedder, _ = parts
    metadata = auth(make_token, "t-events-failed")
    async with replica(url, verifier, blobs, embedder) as stub:
        corpus_id = await new_corpus(stub, metadata)
        (job_id,) = await ingest_texts(stub, metadata, corpus_id, 1, "%BROKEN%")
        job = await wait_terminal(stub, metadata, job_id)
        assert job.state == ingest_pb2.DOCUMENT_STATE_FAILED and job.error
        events = await collect(stub, metadata, "", lambda got: got[-1].type == "document.failed")
    assert events[-1].reason == job.error and events[-1].corpus_id == corpus_id


async def test_cursors_out_of_retention_or_not_issued_are_refused_and_a_quiet_stream_has_heartbeats(
    parts, verifier, make_token
):
    url, blobs, embedder, admin = parts
    tenant = "t-events-retention"
    metadata = auth(make_token, tenant)
    async with replica(url, verifier, blobs, embedder) as stub:
        for _ in range(3):
            await new_corpus(stub, metadata)
        # The relay numbers events after their commit: a cursor is one once they are numbered.
        async with asyncio.timeout(10):
            while (await admin.fetchval("n", "SELECT max(seq) FROM events WHERE tenant_id = $1", tenant) or 0) < 3:
                await asyncio.sleep(0.05)
        # A quiet stream: after the three events, heartbeats at the stream's cursor.
        call = stub.WatchEvents(ingest_pb2.WatchEventsRequest(after="1"), metadata=metadata)
        lines = []
        async with asyncio.timeout(10):
            async for event in call:
                lines.append(event)
                if event.type == "stream.heartbeat":
                    break
        call.cancel()
        assert [e.cursor for e in lines] == ["2", "3", "3"] and lines[-1].event_id == ""
        # The two oldest pass the retention and are pruned: cursor 0 misses them, cursor 2 does not.
        await admin.execute(
            "t",
            "UPDATE events SET create_time = now() - interval '2 hours' WHERE tenant_id = $1 AND seq <= 2",
            tenant,
        )
        assert await PostgresEventLog(admin).prune(3600) == 2
        with pytest.raises(grpc.aio.AioRpcError) as expired:
            await collect(stub, metadata, "0", lambda got: True, timeout=5)
        assert expired.value.code() == grpc.StatusCode.OUT_OF_RANGE
        assert "older than the event retention" in expired.value.details()
        assert [e.cursor for e in await collect(stub, metadata, "2", lambda got: True)] == ["3"]
        assert [e.cursor for e in await collect(stub, metadata, "", lambda got: True)] == ["3"]
        for bad in ("abc", "-1", "007", "99"):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await collect(stub, metadata, bad, lambda got: True, timeout=5)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, bad
        # Another tenant's watch sees none of these.
        other = auth(make_token, "t-events-other")
        await new_corpus(stub, other)
        theirs = await collect(stub, other, "", lambda got: True)
        assert [e.cursor for e in theirs] == ["1"]


async def test_a_watcher_is_woken_once_its_event_is_committed_and_numbered(migrated_pg):
    db = await Database.connect(migrated_pg.url(user="knowledge_ingest"), max_size=4)
    wakeups = PostgresWakeups(db)
    relay = OutboxRelay(PostgresEventLog(db), wakeups, poll_s=60)  # woken by the commit, not by polling
    await wakeups.start()
    await relay.start()
    try:
        await db.execute("t", "INSERT INTO tenants (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING", "t-events-wake")
        with wakeups.subscribe("t-events-wake") as wakeup:
            await asyncio.sleep(0.5)  # the LISTEN is in place, the relay's first round done
            wakeup.clear()
            async with db.transaction() as tx:
                await publish(tx, "t-events-wake", [NewEvent(EventType.CORPUS_CREATED, None, 1)])
                await asyncio.sleep(0.3)
                assert not await wakeup.wait(0.01)  # not before the commit
            assert await wakeup.wait(5)
        events = await PostgresEventLog(db).read_after("t-events-wake", 0, 10)
        assert [(e.seq, e.type) for e in events] == [(1, EventType.CORPUS_CREATED)]
    finally:
        await relay.stop()
        await wakeups.stop()
        await db.close()
