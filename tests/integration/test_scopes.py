"""Scopes and confidentiality over real PostgreSQL and real ingest and search gRPC servers
(content-index and the embedder as fakes at ingest's ports; the whole stack through Envoy is in
tests/e2e/test_scopes_gateway.py): every read obeys the caller's node and clearance."""

from __future__ import annotations

import uuid
from pathlib import Path

import grpc
import pytest
from knowledge.v1 import ingest_pb2, search_pb2, search_pb2_grpc
from knowledge_ingest.domain.extraction import Extracted
from knowledge_runtime.auth import PUBLIC_CAPABILITIES
from knowledge_runtime.db.pool import Database
from knowledge_runtime.server import GrpcApp
from knowledge_search.adapters.postgres import PostgresChunkIndex
from knowledge_search.api.servicer import SearchServicer
from knowledge_search.api.servicer import service_spec as search_spec
from knowledge_search.domain.answer import ExtractiveSynthesiser
from knowledge_search.usecases import AnswerUseCases, SearchUseCases

from tests.support import rpc
from tests.support.ingest import (
    CountingEmbedder,
    MemoryBlobs,
    SameVectors,
    ingest_app,
    settings,
    upload,
    wait_terminal,
    wire_fakes,
)
from tests.support.rpc import auth, error_info

pytestmark = pytest.mark.integration


def extract(path: Path, filename: str, mime_type: str) -> Extracted:
    text = path.read_text()
    return Extracted(text=text, page_count=None, extractable=True, format="text")


@pytest.fixture(scope="module")
async def services(migrated_pg, verifier):
    ingest_db = await Database.connect(migrated_pg.url(user="knowledge_ingest"))
    search_db = await Database.connect(migrated_pg.url(user="knowledge_search"))
    admin = await Database.connect(migrated_pg.url())
    ingest = wire_fakes(settings(), ingest_db, MemoryBlobs(admin), CountingEmbedder(), extract)
    ingest_server = ingest_app(ingest, verifier)
    searches = SearchUseCases(PostgresChunkIndex(search_db), SameVectors())
    search_app = GrpcApp(
        services=[search_spec(SearchServicer(searches, AnswerUseCases(searches, ExtractiveSynthesiser())))],
        verifier=verifier,
    )
    ingest_port, search_port = await ingest_server.start(), await search_app.start()
    ingest_channel = grpc.aio.insecure_channel(f"127.0.0.1:{ingest_port}")
    search_channel = grpc.aio.insecure_channel(f"127.0.0.1:{search_port}")
    yield (
        rpc.IngestStub(ingest_channel),
        search_pb2_grpc.SearchServiceStub(search_channel),
        admin,
    )
    await ingest_channel.close()
    await search_channel.close()
    await search_app.stop()
    await ingest_server.stop()
    for db in (ingest_db, search_db, admin):
        await db.close()


# corpus name -> (node it is bound to, band); each holds one document "<name>.txt" on zebras.
LAYOUT = {
    "root": ("/", "TENANT"),
    "shared": ("/", "GENERAL"),
    "secret": ("/", "CONFIDENTIAL"),
    "eng": ("workspace:eng", "TENANT"),
    "billing": ("workspace:eng/project:billing", "TENANT"),
    "launch": ("workspace:eng/project:billing/mission:launch", "TENANT"),
    "sales": ("workspace:sales", "TENANT"),
}


@pytest.fixture(scope="module")
async def tenant(services, make_token):
    """A tenant laid out as LAYOUT, by a root token with clearance RESTRICTED."""
    ingest, _, _ = services
    name = f"scopes-{uuid.uuid4().hex[:8]}"
    admin = auth(make_token(name, clearance="RESTRICTED"))
    corpora, documents = {}, {}
    for corpus, (node, band) in LAYOUT.items():
        made = await ingest.CreateCorpus(
            ingest_pb2.CreateCorpusRequest(name=corpus, confidentiality=band), metadata=admin
        )
        assert made.scope == "/" and made.confidentiality == band
        corpora[corpus] = made.corpus_id
        text = f"# {corpus}\n\nZebras of the {corpus} corpus graze here; zebra stripes are unique.".encode()
        reply = await upload(ingest, admin, made.corpus_id, text, f"{corpus}.txt")
        job = await wait_terminal(ingest, admin, reply.job_id)
        assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, job.error
        documents[corpus] = (job.result.document_id, reply.job_id)
        if node != "/":  # bound last: the root token no longer reaches it afterwards
            bound = await ingest.BindCorpus(
                ingest_pb2.BindCorpusRequest(corpus_id=made.corpus_id, scope=node), metadata=admin
            )
            assert bound.corpus.scope == node
    return {"name": name, "corpora": corpora, "documents": documents}


def token(make_token, tenant, scope="/", clearance=None, **kwargs):
    return auth(make_token(tenant["name"], scope=scope, clearance=clearance, **kwargs))


# scope, clearance -> the corpora that reader sees
READERS = {
    ("/", None): {"root", "shared"},
    ("/", "GENERAL"): {"shared"},
    ("/", "CONFIDENTIAL"): {"root", "shared", "secret"},
    ("workspace:eng", None): {"root", "shared", "eng"},
    ("workspace:eng/project:billing", None): {"root", "shared", "eng", "billing"},
    ("workspace:eng/project:billing/mission:launch", None): {"root", "shared", "eng", "billing", "launch"},
    ("workspace:sales", None): {"root", "shared", "sales"},
}


@pytest.mark.parametrize(("scope", "clearance"), list(READERS))
async def test_every_read_sees_exactly_the_readers_reach(services, tenant, make_token, scope, clearance):
    ingest, search, _ = services
    metadata = token(make_token, tenant, scope, clearance)
    expected = READERS[(scope, clearance)]
    for mode in (search_pb2.SEARCH_MODE_HYBRID, search_pb2.SEARCH_MODE_LEXICAL):
        found = await search.Search(
            search_pb2.SearchRequest(query="zebra stripes", top_k=50, mode=mode), metadata=metadata
        )
        assert {r.filename.removesuffix(".txt") for r in found.results} == expected
    answer = await search.Query(search_pb2.QueryRequest(query="zebra stripes", top_k=50), metadata=metadata)
    assert {c.filename.removesuffix(".txt") for c in answer.citations} <= expected
    agent = await search.SearchDocuments(search_pb2.SearchDocumentsRequest(query="zebra", top_k=50), metadata=metadata)
    assert agent.result_count == len(expected)
    listed = await ingest.ListCorpora(ingest_pb2.ListCorporaRequest(), metadata=metadata)
    assert {c.name for c in listed.corpora} == expected
    context = await ingest.GetPromptContext(ingest_pb2.GetPromptContextRequest(), metadata=metadata)
    assert context.corpus_count == len(expected) and context.document_count == len(expected)
    for corpus, corpus_id in tenant["corpora"].items():
        document_id, job_id = tenant["documents"][corpus]
        reads = [
            ingest.GetDocument(ingest_pb2.GetDocumentRequest(document_id=document_id), metadata=metadata),
            ingest.GetDocumentText(ingest_pb2.GetDocumentTextRequest(document_id=document_id), metadata=metadata),
            ingest.ListDocuments(ingest_pb2.ListDocumentsRequest(corpus_id=corpus_id), metadata=metadata),
            ingest.GetIngestJob(ingest_pb2.GetIngestJobRequest(job_id=job_id), metadata=metadata),
            search.Search(search_pb2.SearchRequest(query="zebra", corpus_id=corpus_id), metadata=metadata),
            search.Search(search_pb2.SearchRequest(query="zebra", document_id=document_id), metadata=metadata),
        ]
        for call in reads:
            if corpus in expected:
                await call
            else:
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await call
                assert caught.value.code() == grpc.StatusCode.NOT_FOUND, (corpus, caught.value.details())


async def test_writes_outside_the_reach_are_not_found_and_change_nothing(services, tenant, make_token):
    ingest, _, admin = services
    billing = token(make_token, tenant, "workspace:eng/project:billing")
    sales_document, _ = tenant["documents"]["sales"]
    for call in (
        ingest.DeleteDocument(ingest_pb2.DeleteDocumentRequest(document_id=sales_document), metadata=billing),
        ingest.MoveDocuments(
            ingest_pb2.MoveDocumentsRequest(
                target_corpus_id=tenant["corpora"]["billing"], document_ids=[sales_document]
            ),
            metadata=billing,
        ),
        ingest.MoveDocuments(
            ingest_pb2.MoveDocumentsRequest(
                target_corpus_id=tenant["corpora"]["sales"],
                source_corpus_id=tenant["corpora"]["billing"],
                all_documents=True,
            ),
            metadata=billing,
        ),
        ingest.IngestText(
            ingest_pb2.IngestTextRequest(corpus_id=tenant["corpora"]["sales"], text="x", title="x"), metadata=billing
        ),
        ingest.IngestText(ingest_pb2.IngestTextRequest(document_id=sales_document, text="new"), metadata=billing),
        ingest.BindCorpus(
            ingest_pb2.BindCorpusRequest(corpus_id=tenant["corpora"]["sales"], scope="workspace:eng/project:billing"),
            metadata=billing,
        ),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND, caught.value.details()
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await upload(ingest, billing, tenant["corpora"]["sales"], b"zebra", "x.txt")
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    row = await admin.fetchrow(
        "t", "SELECT corpus_id, state FROM documents WHERE document_id = $1", int(sales_document)
    )
    assert str(row["corpus_id"]) == tenant["corpora"]["sales"] and row["state"] == "SEARCHABLE"


async def test_unresolved_scopes_read_nothing(services, tenant, make_token):
    ingest, search, _ = services
    document_id, _ = tenant["documents"]["root"]
    for metadata in (
        token(make_token, tenant, scope=None),  # no scope claim
        token(make_token, tenant, scope="workspace:nowhere"),  # a node the tenant does not have
        token(make_token, tenant, scope="project:billing"),  # no scope path at all
        auth(make_token(f"other-{uuid.uuid4().hex[:6]}", scope="workspace:eng")),  # another tenant's node
    ):
        for call in (
            search.Search(search_pb2.SearchRequest(query="zebra"), metadata=metadata),
            search.Query(search_pb2.QueryRequest(query="zebra"), metadata=metadata),
            ingest.ListCorpora(ingest_pb2.ListCorporaRequest(), metadata=metadata),
            ingest.GetDocument(ingest_pb2.GetDocumentRequest(document_id=document_id), metadata=metadata),
            ingest.GetPromptContext(ingest_pb2.GetPromptContextRequest(), metadata=metadata),
            ingest.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="never"), metadata=metadata),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await call
            assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
            assert error_info(caught.value).reason == "SCOPE_UNRESOLVED"


async def test_binding_moves_a_corpus_between_readers(services, make_token):
    ingest, search, _ = services
    tenant = {"name": f"bind-{uuid.uuid4().hex[:8]}"}
    root, eng = token(make_token, tenant), None
    made = await ingest.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="notes"), metadata=root)
    reply = await upload(ingest, root, made.corpus_id, b"# Notes\n\nOkapi sightings near the river.", "notes.txt")
    assert (await wait_terminal(ingest, root, reply.job_id)).state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE
    bound = await ingest.BindCorpus(
        ingest_pb2.BindCorpusRequest(corpus_id=made.corpus_id, scope="/workspace:eng/"), metadata=root
    )
    assert bound.corpus.scope == "workspace:eng" and bound.corpus.document_count == 1
    eng = token(make_token, tenant, "workspace:eng")
    billing = token(make_token, tenant, "workspace:eng/project:billing")

    async def sees(metadata) -> bool:
        found = await search.Search(search_pb2.SearchRequest(query="okapi"), metadata=metadata)
        return any(r.filename == "notes.txt" for r in found.results)

    assert not await sees(root) and await sees(eng)
    with pytest.raises(grpc.aio.AioRpcError) as caught:  # the project node does not exist yet
        await sees(billing)
    assert error_info(caught.value).reason == "SCOPE_UNRESOLVED"
    await ingest.BindCorpus(
        ingest_pb2.BindCorpusRequest(corpus_id=made.corpus_id, scope="workspace:eng/project:billing"), metadata=eng
    )
    assert not await sees(eng) and await sees(billing)  # now a descendant of eng's node
    for upward in ("workspace:eng", "/", "workspace:eng/project:search"):  # never above or beside its node
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await ingest.BindCorpus(
                ingest_pb2.BindCorpusRequest(corpus_id=made.corpus_id, scope=upward), metadata=billing
            )
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_info(caught.value).reason == "SCOPE_OUT_OF_REACH"
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await ingest.BindCorpus(
            ingest_pb2.BindCorpusRequest(corpus_id=made.corpus_id, scope="team:x"), metadata=billing
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    no_bind = token(make_token, tenant, "workspace:eng/project:billing", capabilities=["corpus.read"])
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await ingest.BindCorpus(
            ingest_pb2.BindCorpusRequest(corpus_id=made.corpus_id, scope="workspace:eng/project:billing"),
            metadata=no_bind,
        )
    assert error_info(caught.value).reason == "CAPABILITY_MISSING"


async def test_a_band_above_the_creators_clearance_is_refused(services, make_token):
    ingest, _, _ = services
    tenant = {"name": f"band-{uuid.uuid4().hex[:8]}"}
    for band in ("CONFIDENTIAL", "RESTRICTED", "SECRET"):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await ingest.CreateCorpus(
                ingest_pb2.CreateCorpusRequest(name=band, confidentiality=band), metadata=token(make_token, tenant)
            )
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    made = await ingest.CreateCorpus(
        ingest_pb2.CreateCorpusRequest(name="c", confidentiality="CONFIDENTIAL"),
        metadata=token(make_token, tenant, clearance="CONFIDENTIAL"),
    )
    assert made.confidentiality == "CONFIDENTIAL"
    plain = await ingest.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="p"), metadata=token(make_token, tenant))
    assert plain.confidentiality == "TENANT" and plain.scope == "/"


MISSION = "workspace:eng/project:billing/mission:launch"


async def test_an_ancestors_corpus_is_read_only_to_a_lower_token(services, make_token):
    """The attack: a mission token bound a root corpus to its own node (taking it from every node
    above), deleted it, and deleted a document of another root corpus. Each write is refused with
    403 CORPUS_READ_ONLY naming where the corpus sits, nothing changes, and the root still reads
    and rebinds its corpus."""
    ingest, _, admin = services
    tenant = {"name": f"readonly-{uuid.uuid4().hex[:8]}"}
    root = token(make_token, tenant)
    payroll = await ingest.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="payroll"), metadata=root)
    handbook = await ingest.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="handbook"), metadata=root)
    own = await ingest.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="launch-notes"), metadata=root)
    jobs = {}
    for corpus in (payroll, handbook):
        reply = await upload(ingest, root, corpus.corpus_id, f"# {corpus.name}\n\nQuokka figures.".encode())
        jobs[corpus.name] = await wait_terminal(ingest, root, reply.job_id)
        assert jobs[corpus.name].state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE
    document = jobs["handbook"].result.document_id
    await ingest.BindCorpus(ingest_pb2.BindCorpusRequest(corpus_id=own.corpus_id, scope=MISSION), metadata=root)
    mission = token(make_token, tenant, MISSION, capabilities=[*PUBLIC_CAPABILITIES])

    writes = {
        "bind": ingest.BindCorpus(
            ingest_pb2.BindCorpusRequest(corpus_id=payroll.corpus_id, scope=MISSION), metadata=mission
        ),
        "delete corpus": ingest.DeleteCorpus(
            ingest_pb2.DeleteCorpusRequest(corpus_id=payroll.corpus_id, delete_documents=True), metadata=mission
        ),
        "delete document": ingest.DeleteDocument(
            ingest_pb2.DeleteDocumentRequest(document_id=document), metadata=mission
        ),
        "move out": ingest.MoveDocuments(
            ingest_pb2.MoveDocumentsRequest(target_corpus_id=own.corpus_id, document_ids=[document]),
            metadata=mission,
        ),
        "move all out": ingest.MoveDocuments(
            ingest_pb2.MoveDocumentsRequest(
                target_corpus_id=own.corpus_id, source_corpus_id=handbook.corpus_id, all_documents=True
            ),
            metadata=mission,
        ),
        "move in": ingest.MoveDocuments(
            ingest_pb2.MoveDocumentsRequest(
                target_corpus_id=payroll.corpus_id, source_corpus_id=own.corpus_id, all_documents=True
            ),
            metadata=mission,
        ),
        "text": ingest.IngestText(
            ingest_pb2.IngestTextRequest(corpus_id=payroll.corpus_id, text="planted", title="x"), metadata=mission
        ),
        "new content": ingest.IngestText(
            ingest_pb2.IngestTextRequest(document_id=document, text="replaced"), metadata=mission
        ),
        "url": ingest.IngestUrl(
            ingest_pb2.IngestUrlRequest(corpus_id=payroll.corpus_id, url="https://example.com/planted"),
            metadata=mission,
        ),
        "cancel": ingest.CancelIngestJob(
            ingest_pb2.CancelIngestJobRequest(job_id=jobs["handbook"].job_id), metadata=mission
        ),
        "retry": ingest.RetryIngestJob(
            ingest_pb2.RetryIngestJobRequest(job_id=jobs["handbook"].job_id), metadata=mission
        ),
        "upload": upload(ingest, mission, payroll.corpus_id, b"planted", "planted.txt"),
    }
    for what, call in writes.items():
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED, (what, caught.value.details())
        info = error_info(caught.value)
        assert info.reason == "CORPUS_READ_ONLY", what
        assert info.metadata["corpus_scope"] == "/" and info.metadata["scope"] == MISSION, what
    batch = await ingest.BatchIngestTexts(
        ingest_pb2.BatchIngestTextsRequest(
            items=[ingest_pb2.IngestTextRequest(corpus_id=payroll.corpus_id, text="planted", title="x")]
        ),
        metadata=mission,
    )
    assert (batch.items[0].error_reason, batch.items[0].error_code) == ("CORPUS_READ_ONLY", "PERMISSION_DENIED")

    # Nothing changed: both corpora at the root, live, with their documents.
    rows = await admin.fetch(
        "t",
        "SELECT corpus_id::text, scope_path, deleted_at IS NULL AS live, "
        "(SELECT count(*) FROM documents d WHERE d.corpus_id = c.corpus_id AND d.deleted_at IS NULL) AS documents "
        "FROM corpora c WHERE tenant_id = $1 ORDER BY c.corpus_id",
        tenant["name"],
    )
    assert [(r["corpus_id"], r["scope_path"], r["live"], r["documents"]) for r in rows] == [
        (payroll.corpus_id, "/", True, 1),
        (handbook.corpus_id, "/", True, 1),
        (own.corpus_id, MISSION, True, 0),
    ]
    # The mission token still reads them, and still writes its own corpus.
    listed = await ingest.ListCorpora(ingest_pb2.ListCorporaRequest(), metadata=mission)
    assert {c.name for c in listed.corpora} == {"payroll", "handbook", "launch-notes"}
    mine = await upload(ingest, mission, own.corpus_id, b"# Launch\n\nQuokka launch notes.", "launch.txt")
    assert (await wait_terminal(ingest, mission, mine.job_id)).state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE
    # The root (and the nodes between) still see the corpus, and the root rebinds it.
    for reader in (root, token(make_token, tenant, "workspace:eng/project:billing")):
        names = {c.name for c in (await ingest.ListCorpora(ingest_pb2.ListCorporaRequest(), metadata=reader)).corpora}
        assert {"payroll", "handbook"} <= names
    rebound = await ingest.BindCorpus(
        ingest_pb2.BindCorpusRequest(corpus_id=payroll.corpus_id, scope="workspace:eng"), metadata=root
    )
    assert rebound.corpus.scope == "workspace:eng"


async def test_corpus_names_are_unique_per_node_and_a_name_out_of_reach_behaves_as_absent(services, make_token):
    """The attack: a GENERAL token of one project got 409 creating names of corpora it cannot
    read (a RESTRICTED one at the root, another project's, another workspace's)."""
    ingest, _, _ = services
    tenant = {"name": f"names-{uuid.uuid4().hex[:8]}"}
    root = token(make_token, tenant, clearance="RESTRICTED")
    for name, band, node in (
        ("root-restr", "RESTRICTED", "/"),
        ("payroll", "TENANT", "workspace:eng/project:payroll"),
        ("sales", "TENANT", "workspace:sales"),
        ("billing-notes", "TENANT", "workspace:eng/project:billing"),
    ):
        made = await ingest.CreateCorpus(ingest_pb2.CreateCorpusRequest(name=name, confidentiality=band), metadata=root)
        if node != "/":
            await ingest.BindCorpus(ingest_pb2.BindCorpusRequest(corpus_id=made.corpus_id, scope=node), metadata=root)
    billing = token(make_token, tenant, "workspace:eng/project:billing", clearance="GENERAL")
    for name in ("root-restr", "payroll", "sales"):
        made = await ingest.CreateCorpus(
            ingest_pb2.CreateCorpusRequest(name=name, confidentiality="GENERAL"), metadata=billing
        )
        assert (made.name, made.scope) == (name, "workspace:eng/project:billing")
    with pytest.raises(grpc.aio.AioRpcError) as caught:  # its own node's name, which it reads
        await ingest.CreateCorpus(
            ingest_pb2.CreateCorpusRequest(name="payroll", confidentiality="GENERAL"), metadata=billing
        )
    assert caught.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert error_info(caught.value).reason == "CORPUS_ALREADY_EXISTS"
    with pytest.raises(grpc.aio.AioRpcError) as caught:  # the root's own node holds the name too
        await ingest.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="root-restr"), metadata=root)
    assert caught.value.code() == grpc.StatusCode.ALREADY_EXISTS
    # Binding into a node where the name is taken in the same band is a conflict, never a 500.
    second = await ingest.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="billing-notes"), metadata=root)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await ingest.BindCorpus(
            ingest_pb2.BindCorpusRequest(corpus_id=second.corpus_id, scope="workspace:eng/project:billing"),
            metadata=root,
        )
    assert caught.value.code() == grpc.StatusCode.ALREADY_EXISTS
