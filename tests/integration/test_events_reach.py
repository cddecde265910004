"""Events obey scope and clearance, on real PostgreSQL and the real ingest gRPC server (the
embedder and blobs as fakes at their ports): a consumer is sent only the events of corpora it
could read now, the cursor moves past the others, and a rebinding out of a consumer's reach stops
its corpus's events for that consumer from the rebinding on."""

import asyncio
import re
import uuid
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import pytest
from knowledge.v1 import ingest_pb2
from knowledge_ingest.domain.events import EventPlacement, EventType, NewEvent
from knowledge_ingest.domain.extraction import Extracted
from knowledge_ingest.domain.system_corpora import CorpusKind
from knowledge_ingest.events.outbox import PostgresEventLog, publish
from knowledge_runtime.db.pool import Database
from knowledge_runtime.reach import Band, ScopePath

from tests.support import rpc
from tests.support.ingest import CountingEmbedder, MemoryBlobs, ingest_app, settings, wait_terminal, wire_fakes
from tests.support.rpc import error_info

pytestmark = pytest.mark.integration

# corpus -> (node it is bound to, band)
LAYOUT = {
    "handbook": ("/", "TENANT"),
    "salaries": ("/", "CONFIDENTIAL"),
    "runbooks": ("workspace:eng", "TENANT"),
    "pipeline": ("workspace:sales", "TENANT"),
}
# (scope, clearance) -> the corpora whose events it is sent
CONSUMERS = {
    ("/", "TENANT"): {"handbook"},
    ("/", "RESTRICTED"): {"handbook", "salaries"},
    ("workspace:eng", "TENANT"): {"handbook", "runbooks"},
    ("workspace:eng", "CONFIDENTIAL"): {"handbook", "salaries", "runbooks"},
    ("workspace:sales", "RESTRICTED"): {"handbook", "salaries", "pipeline"},
}


def extract(path: Path, filename: str, mime_type: str) -> Extracted:
    text = path.read_bytes().decode("utf-8", "replace")
    return Extracted(text=text, page_count=None, extractable=bool(text.strip()), format="text")


@asynccontextmanager
async def ingest(url: str, verifier, blobs, embedder):
    db = await Database.connect(url, max_size=6)
    ingest = wire_fakes(settings(KNOWLEDGE_EVENTS_HEARTBEAT_S="0.5"), db, blobs, embedder, extract)
    app = ingest_app(ingest, verifier)
    port = await app.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield rpc.IngestStub(channel)
    finally:
        await channel.close()
        await app.stop()
        await db.close()


@pytest.fixture
async def stack(migrated_pg, verifier, make_token):
    admin = await Database.connect(migrated_pg.url())
    tenant = f"t-events-reach-{uuid.uuid4().hex[:8]}"
    async with ingest(
        migrated_pg.url(user="knowledge_ingest"), verifier, MemoryBlobs(admin), CountingEmbedder()
    ) as stub:

        def token(scope: str | None = "/", clearance: str = "RESTRICTED") -> list[tuple[str, str]]:
            return [("authorization", f"Bearer {make_token(tenant, scope=scope, clearance=clearance)}")]

        async def head() -> int:
            return int(
                await admin.fetchval(
                    "t", "SELECT coalesce((SELECT last_seq FROM event_heads WHERE tenant_id = $1), 0)", tenant
                )
            )

        yield stub, token, head
    await admin.close()


async def add_document(stub, metadata, corpus_id: str, tag: str) -> str:
    reply = await stub.BatchIngestTexts(
        ingest_pb2.BatchIngestTextsRequest(
            items=[ingest_pb2.IngestTextRequest(corpus_id=corpus_id, text=f"# {tag}\n\nAbout {tag}.", title=tag)]
        ),
        metadata=metadata,
    )
    job = await wait_terminal(stub, metadata, reply.items[0].job.job_id)
    assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE
    return job.result.document_id


async def read_until(stub, metadata, after: str, until, timeout: float = 30.0) -> list[ingest_pb2.Event]:
    """Every line (heartbeats too) from the cursor until ``until(line)`` holds."""
    lines: list[ingest_pb2.Event] = []
    call = stub.WatchEvents(ingest_pb2.WatchEventsRequest(after=after), metadata=metadata)
    try:
        async with asyncio.timeout(timeout):
            async for line in call:
                lines.append(line)
                if until(line):
                    return lines
    finally:
        call.cancel()
    raise AssertionError(f"the stream ended after {lines}")


async def lay_out(stub, token) -> tuple[dict[str, str], dict[str, str]]:
    """The corpora created at the root, a document each, then bound to their nodes."""
    admin = token()
    corpora, documents = {}, {}
    for name, (_, band) in LAYOUT.items():
        made = await stub.CreateCorpus(ingest_pb2.CreateCorpusRequest(name=name, confidentiality=band), metadata=admin)
        corpora[name] = made.corpus_id
        documents[name] = await add_document(stub, admin, made.corpus_id, name)
    for name, (node, _) in LAYOUT.items():
        if node != "/":
            await stub.BindCorpus(ingest_pb2.BindCorpusRequest(corpus_id=corpora[name], scope=node), metadata=admin)
    return corpora, documents


async def test_each_consumer_is_sent_only_the_events_of_corpora_it_could_read_and_its_cursor_moves_past_the_rest(
    stack,
):
    stub, token, head = stack
    corpora, _ = await lay_out(stub, token)
    names = {corpus_id: name for name, corpus_id in corpora.items()}
    newest = await head()
    assert newest == 2 * len(LAYOUT)  # corpus.created and document.searchable for each
    for (scope, clearance), expected in CONSUMERS.items():
        lines = await read_until(stub, token(scope, clearance), "", lambda line: int(line.cursor) >= newest)
        events = [line for line in lines if line.type != EventType.HEARTBEAT]
        seen = [(names[e.corpus_id], e.type) for e in events]
        # Read now, the corpora bound below the root are out of a root token's reach — also their
        # corpus.created, written while they were still at the root.
        assert sorted(seen) == sorted((name, t) for name in expected for t in ("corpus.created", "document.searchable"))
        cursors = [int(line.cursor) for line in lines]
        assert cursors == sorted(cursors) and cursors[-1] == newest, (scope, clearance)  # a resume starts at the head
    # A TENANT-clearance token never hears that the confidential corpus was created.
    seen_by_tenant = await read_until(stub, token("/", "TENANT"), "", lambda line: int(line.cursor) >= newest)
    assert corpora["salaries"] not in {e.corpus_id for e in seen_by_tenant}


async def test_a_corpus_rebound_out_of_reach_stops_being_delivered_from_the_rebinding_on(stack):
    stub, token, head = stack
    corpora, _ = await lay_out(stub, token)
    eng, sales = token("workspace:eng", "TENANT"), token("workspace:sales", "TENANT")
    start = str(await head())
    eng_live = asyncio.create_task(
        read_until(stub, eng, start, lambda line: line.corpus_id == corpora["runbooks"] and line.document_id != "")
    )
    await asyncio.sleep(0.3)  # the live stream is open at the head
    # The handbook (at the root: eng reads it) is bound down into sales: out of eng's reach.
    await stub.BindCorpus(
        ingest_pb2.BindCorpusRequest(corpus_id=corpora["handbook"], scope="workspace:sales"), metadata=token()
    )
    moved_away = await add_document(stub, token("workspace:sales"), corpora["handbook"], "after the rebinding")
    later = await add_document(stub, token("workspace:eng"), corpora["runbooks"], "still in reach")
    got = await eng_live
    # The handbook document committed before the runbooks one: had it been sent, it would be here.
    assert [(e.corpus_id, e.document_id) for e in got if e.type != EventType.HEARTBEAT] == [
        (corpora["runbooks"], later)
    ]
    # Replayed from the start, eng no longer hears of the handbook at all; sales now does.
    newest = await head()
    replay = await read_until(stub, eng, "", lambda line: int(line.cursor) >= newest)
    assert corpora["handbook"] not in {e.corpus_id for e in replay}
    assert {e.corpus_id for e in replay if e.type != EventType.HEARTBEAT} == {corpora["runbooks"]}
    theirs = await read_until(stub, sales, "", lambda line: int(line.cursor) >= newest)
    assert moved_away in {e.document_id for e in theirs if e.corpus_id == corpora["handbook"]}
    assert {e.corpus_id for e in theirs if e.type != EventType.HEARTBEAT} == {corpora["handbook"], corpora["pipeline"]}


async def test_an_unresolved_scope_watches_nothing(stack):
    stub, token, _ = stack
    await lay_out(stub, token)
    for metadata in (token(None), token("workspace:nowhere")):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await read_until(stub, metadata, "", lambda line: True, timeout=10)
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "scope" in refused.value.details()


async def test_once_its_corpus_is_gone_an_event_keeps_the_placement_written_with_it(migrated_pg):
    """The placement is recorded in the event's own transaction and read only when the corpus
    row no longer exists (a deleted corpus's last events still reach those who could read it)."""
    tenant = f"t-events-gone-{uuid.uuid4().hex[:8]}"
    db = await Database.connect(migrated_pg.url(user="knowledge_ingest"), max_size=2)
    try:
        await db.execute("t", "INSERT INTO tenants (tenant_id) VALUES ($1)", tenant)
        corpus_id = await db.fetchval(
            "t",
            "INSERT INTO corpora (tenant_id, name, scope_path, confidentiality) "
            "VALUES ($1, 'gone', 'workspace:eng', 'CONFIDENTIAL') RETURNING corpus_id",
            tenant,
        )
        async with db.transaction() as tx:
            await publish(
                tx, tenant, [NewEvent(EventType.CORPUS_DELETED, None, corpus_id), NewEvent(EventType.CORPUS_CREATED)]
            )
            await tx.execute("t", "DELETE FROM corpora WHERE corpus_id = $1", corpus_id)
        await PostgresEventLog(db).number_committed()
        gone, unplaced = await PostgresEventLog(db).read_after(tenant, 0, 10)
        assert gone.placement == EventPlacement(ScopePath.parse("workspace:eng"), Band.CONFIDENTIAL, CorpusKind.USER)
        assert unplaced.placement is None  # no corpus: sent to no one
    finally:
        await db.close()


async def test_an_empty_corpus_s_deletion_is_delivered_with_the_placement_it_had(stack):
    """An empty corpus's row goes in its deletion's transaction; its ``corpus.deleted`` is written
    before that, so it carries the corpus's placement and reaches who could read the corpus."""
    stub, token, head = stack
    made = await stub.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="short-lived"), metadata=token())
    await stub.DeleteCorpus(ingest_pb2.DeleteCorpusRequest(corpus_id=made.corpus_id), metadata=token())
    async with asyncio.timeout(10):  # both events numbered by the relay
        while (newest := await head()) < 2:
            await asyncio.sleep(0.05)
    lines = await read_until(stub, token(), "", lambda line: int(line.cursor) >= newest)
    assert [(e.corpus_id, e.type) for e in lines if e.type != EventType.HEARTBEAT] == [
        (made.corpus_id, "corpus.created"),
        (made.corpus_id, "corpus.deleted"),
    ]


async def test_a_cursor_ahead_of_the_newest_tells_nothing_of_the_tenants_newest(stack):
    """The tenant's newest cursor counts every event of the tenant; a consumer that reads few of
    them must not learn it from the refusal."""
    stub, token, head = stack
    await lay_out(stub, token)
    newest = await head()
    for metadata in (token("workspace:sales", "TENANT"), token()):
        with pytest.raises(grpc.aio.AioRpcError) as ahead:
            await read_until(stub, metadata, str(newest + 1000), lambda line: True, timeout=10)
        assert ahead.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        info = error_info(ahead.value)
        told = [ahead.value.details(), *info.metadata.values()]
        assert not any(str(newest) in re.findall(r"\d+", text) for text in told), told
