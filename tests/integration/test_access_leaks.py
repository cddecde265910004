"""Access lists leak nowhere: every RPC of every public service (walked from the generated
descriptors, so a new RPC that is neither called here nor exempted with its reason fails the walk)
is called as three users of one tenant, all reaching the shared corpus: ana (named in the list),
bob (in the listed group hr) and carl (neither, in group finance). The restricted documents (an
upload, an indexed reference, a deleted one, a housekeeping entry) must reach ana and bob through
every read and never carl: no document id, filename or word of theirs in any answer, a count that
leaves them out, and 404 by id (to writes as to reads). Real ingest (its ports as fakes), search
and documents-ai over one PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from google.protobuf import message as protobuf_message
from knowledge.v1 import documents_ai_pb2, ingest_pb2, search_pb2
from knowledge_gateway.descriptors import public_service_names

from tests.support.access import (
    LISTED,
    QUERY,
    READERS,
    SECRET,
    Call,
    World,
    access_world,
    events_until_quiet,
    one,
    snapshot,
    stream_until,
)
from tests.support.ingest import wait_terminal
from tests.support.rpc import error_info

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
async def stack(migrated_pg, keys_dir, verifier, make_token, tmp_path_factory):
    async with access_world(migrated_pg, keys_dir, verifier, make_token, tmp_path_factory.mktemp("leaks")) as world:
        yield world


# What a document the caller may not read answers (and a job of one).
NOT_FOUND_AS_ABSENT = {"DOCUMENT_NOT_FOUND", "INGEST_JOB_NOT_FOUND"}
# How a call is judged:
# - "list": what it answers names no restricted document to carl, and some to ana and bob;
# - "id": it names a restricted document; carl is answered NOT_FOUND, ana and bob anything else;
# - "write": it would change a restricted document; carl is answered NOT_FOUND (ana and bob are
#   not called: nothing may change);
# - "count": its counts are of the documents the caller may read (checked by ``counts``).
CASES: dict[str, list[tuple[str, Call]]] = {
    "knowledge.v1.CorpusService/ListCorpora": [
        ("count", lambda w, md: one(w.ingest.ListCorpora(ingest_pb2.ListCorporaRequest(), metadata=md)))
    ],
    "knowledge.v1.DocumentService/GetDocument": [
        (
            "id",
            lambda w, md: one(
                w.ingest.GetDocument(ingest_pb2.GetDocumentRequest(document_id=w.secret_id), metadata=md)
            ),
        ),
        (
            "id",
            lambda w, md: one(
                w.ingest.GetDocument(ingest_pb2.GetDocumentRequest(document_id=w.reference_id), metadata=md)
            ),
        ),
    ],
    "knowledge.v1.DocumentService/UpdateDocument": [
        (
            "write",
            lambda w, md: one(
                w.ingest.UpdateDocument(
                    ingest_pb2.UpdateDocumentRequest(
                        document_id=w.secret_id, document=ingest_pb2.Document(filename="renamed.md")
                    ),
                    metadata=md,
                )
            ),
        )
    ],
    "knowledge.v1.DocumentService/ListDocuments": [
        (
            "list",
            lambda w, md: one(
                w.ingest.ListDocuments(ingest_pb2.ListDocumentsRequest(corpus_id=w.corpus_id), metadata=md)
            ),
        )
    ],
    "knowledge.v1.DocumentService/BatchGetDocuments": [
        (
            "list",
            lambda w, md: one(
                w.ingest.BatchGetDocuments(
                    ingest_pb2.BatchGetDocumentsRequest(document_ids=[w.open_id, w.secret_id, w.reference_id]),
                    metadata=md,
                )
            ),
        )
    ],
    "knowledge.v1.DocumentService/GetDocumentText": [
        (
            "id",
            lambda w, md: one(
                w.ingest.GetDocumentText(ingest_pb2.GetDocumentTextRequest(document_id=w.secret_id), metadata=md)
            ),
        )
    ],
    "knowledge.v1.DocumentService/MoveDocuments": [
        (
            "write",
            lambda w, md: one(
                w.ingest.MoveDocuments(
                    ingest_pb2.MoveDocumentsRequest(target_corpus_id=w.corpus_id, document_ids=[w.secret_id]),
                    metadata=md,
                )
            ),
        )
    ],
    "knowledge.v1.DocumentService/DeleteDocument": [
        (
            "write",
            lambda w, md: one(
                w.ingest.DeleteDocument(ingest_pb2.DeleteDocumentRequest(document_id=w.secret_id), metadata=md)
            ),
        )
    ],
    "knowledge.v1.DocumentService/WatchDocuments": [("list", snapshot)],
    "knowledge.v1.DocumentService/ListTombstones": [
        ("list", lambda w, md: one(w.ingest.ListTombstones(ingest_pb2.ListTombstonesRequest(), metadata=md)))
    ],
    "knowledge.v1.DocumentService/GetPromptContext": [
        ("count", lambda w, md: one(w.ingest.GetPromptContext(ingest_pb2.GetPromptContextRequest(), metadata=md)))
    ],
    "knowledge.v1.DocumentService/SetDocumentAccess": [
        (
            "write",
            lambda w, md: one(
                w.ingest.SetDocumentAccess(
                    ingest_pb2.SetDocumentAccessRequest(document_id=w.secret_id, principals=[]), metadata=md
                )
            ),
        )
    ],
    "knowledge.v1.IngestJobService/IngestText": [
        (
            "write",
            lambda w, md: one(
                w.ingest.IngestText(
                    ingest_pb2.IngestTextRequest(document_id=w.secret_id, text="overwritten"), metadata=md
                )
            ),
        )
    ],
    "knowledge.v1.IngestJobService/GetIngestJob": [
        (
            "id",
            lambda w, md: one(w.ingest.GetIngestJob(ingest_pb2.GetIngestJobRequest(job_id=w.secret_job), metadata=md)),
        )
    ],
    "knowledge.v1.IngestJobService/CancelIngestJob": [
        (
            "write",
            lambda w, md: one(
                w.ingest.CancelIngestJob(ingest_pb2.CancelIngestJobRequest(job_id=w.secret_job), metadata=md)
            ),
        )
    ],
    "knowledge.v1.IngestJobService/RetryIngestJob": [
        (
            "write",
            lambda w, md: one(
                w.ingest.RetryIngestJob(ingest_pb2.RetryIngestJobRequest(job_id=w.secret_job), metadata=md)
            ),
        )
    ],
    "knowledge.v1.EventService/WatchEvents": [("list", events_until_quiet)],
    "knowledge.v1.PassageService/IndexPassages": [
        (
            "write",
            lambda w, md: one(
                w.ingest.IndexPassages(
                    ingest_pb2.IndexPassagesRequest(
                        corpus_id=w.corpus_id,
                        document_ref="hr/private-handbook",
                        content_sha256="cd" * 32,
                        passages=[ingest_pb2.Passage(fragment="#p1", text="replaced")],
                    ),
                    metadata=md,
                )
            ),
        )
    ],
    "knowledge.v1.PassageService/RemoveByReference": [
        (
            "write",
            lambda w, md: one(
                w.ingest.RemoveByReference(
                    ingest_pb2.RemoveByReferenceRequest(corpus_id=w.corpus_id, document_ref="hr/private-handbook"),
                    metadata=md,
                )
            ),
        )
    ],
    "knowledge.v1.SearchService/Search": [
        *(
            (
                "list",
                lambda w, md, mode=mode: one(
                    w.search.Search(search_pb2.SearchRequest(query=QUERY, top_k=50, mode=mode), metadata=md)
                ),
            )
            for mode in (search_pb2.SEARCH_MODE_HYBRID, search_pb2.SEARCH_MODE_VECTOR, search_pb2.SEARCH_MODE_LEXICAL)
        ),
        (
            "id",
            lambda w, md: one(
                w.search.Search(search_pb2.SearchRequest(query=QUERY, document_id=w.secret_id), metadata=md)
            ),
        ),
    ],
    "knowledge.v1.SearchService/SearchDocuments": [
        (
            "list",
            lambda w, md: one(
                w.search.SearchDocuments(search_pb2.SearchDocumentsRequest(query=QUERY, top_k=50), metadata=md)
            ),
        )
    ],
    "knowledge.v1.SearchService/Query": [
        ("list", lambda w, md: one(w.search.Query(search_pb2.QueryRequest(query=QUERY, top_k=50), metadata=md)))
    ],
    "knowledge.v1.SearchService/QueryStream": [
        (
            "list",
            lambda w, md: stream_until(
                w.search.QueryStream(
                    search_pb2.QueryStreamRequest(query=search_pb2.QueryRequest(query=QUERY, top_k=50)), metadata=md
                ),
                lambda message: message.HasField("done"),
                timeout=60,
            ),
        )
    ],
    "knowledge.v1.SearchService/GetContext": [
        (
            "list",
            lambda w, md: one(w.search.GetContext(search_pb2.GetContextRequest(query=QUERY, top_k=50), metadata=md)),
        )
    ],
    "knowledge.v1.SearchService/PrefetchContext": [
        (
            "list",
            lambda w, md: one(
                w.search.PrefetchContext(search_pb2.PrefetchContextRequest(user_message=QUERY), metadata=md)
            ),
        )
    ],
    "knowledge.v1.DocumentsAIService/ClassifyDocument": [
        (
            "id",
            lambda w, md: one(
                w.docai.ClassifyDocument(documents_ai_pb2.ClassifyDocumentRequest(document_id=w.secret_id), metadata=md)
            ),
        )
    ],
    "knowledge.v1.DocumentsAIService/ExtractDocument": [
        (
            "id",
            lambda w, md: one(
                w.docai.ExtractDocument(
                    documents_ai_pb2.ExtractDocumentRequest(document_id=w.secret_id, schema_name="invoice"),
                    metadata=md,
                )
            ),
        )
    ],
    "knowledge.v1.DocumentsAIService/ProcessDocument": [
        (
            "id",
            lambda w, md: one(
                w.docai.ProcessDocument(documents_ai_pb2.ProcessDocumentRequest(document_id=w.secret_id), metadata=md)
            ),
        )
    ],
    "knowledge.v1.DocumentsAIService/ListProcessingResults": [
        (
            "id",
            lambda w, md: one(
                w.docai.ListProcessingResults(
                    documents_ai_pb2.ListProcessingResultsRequest(document_id=w.secret_id), metadata=md
                )
            ),
        )
    ],
}
# Called nowhere above, each for its reason: none reads a document another caller restricted.
WEBHOOK_ADMIN = (
    "webhook administration: an endpoint's settings and attempts, no document (what an endpoint is sent "
    "follows the events' rule, its registrant's principals included: test_webhooks_domain)"
)
MODEL_ADMIN = "the deployment's embedding model: no document"
EXEMPT = {
    "knowledge.v1.CorpusService/CreateCorpus": "makes an empty corpus",
    "knowledge.v1.CorpusService/BindCorpus": "writes a corpus, not a document; its answer's counts are ListCorpora's query",
    "knowledge.v1.CorpusService/DeleteCorpus": "writes a corpus; its answer lists only the tombstones the caller may read",
    "knowledge.v1.CorpusService/SetCorpusDefaultAccess": "writes a corpus's default; its counts are ListCorpora's query",
    "knowledge.v1.IngestJobService/UploadDocument": "makes a new document (a duplicate answers a job GetIngestJob guards)",
    "knowledge.v1.IngestJobService/IngestTexts": "IngestText per item (IngestText is called above)",
    "knowledge.v1.IngestJobService/BatchIngestTexts": "IngestText per item (IngestText is called above)",
    "knowledge.v1.IngestJobService/IngestUrl": "makes a new document from a page the caller names",
    "knowledge.v1.ImportService/ImportPath": "the operator's files under import roots, before they are documents",
    "knowledge.v1.ImportService/ListImportRoots": "the operator's configuration",
    "knowledge.v1.ImportService/SetImportBinding": "the operator's configuration",
    "knowledge.v1.ImportService/ListImportBindings": "the operator's configuration",
    "knowledge.v1.ImportService/ScanImports": "the operator's files under import roots, before they are documents",
    "knowledge.v1.ImportService/ListImportFindings": "the operator's files under import roots, before they are documents",
    "knowledge.v1.ImportService/AcceptImportFinding": "makes a new document from the operator's file",
    "knowledge.v1.ImportService/DismissImportFinding": "the operator's files under import roots, before they are documents",
    "knowledge.v1.TenantService/GetTenantSettings": "platform administration: no document",
    "knowledge.v1.TenantService/UpdateTenantSettings": "platform administration: no document",
    "knowledge.v1.TenantService/GetUsage": "quota accounting: what a node holds, as quotas count it; no document named",
    "knowledge.v1.PassageService/CheckIndexing": "a quota decision; a reference the caller may not read counts as absent",
    "knowledge.v1.DocumentsAIService/CreateDocumentType": "the tenant's taxonomy, no document",
    "knowledge.v1.DocumentsAIService/ListDocumentTypes": "the tenant's taxonomy, no document",
    "knowledge.v1.DocumentsAIService/RetireDocumentType": "the tenant's taxonomy, no document",
    "knowledge.v1.DocumentsAIService/RestoreDocumentType": "the tenant's taxonomy, no document",
    "knowledge.v1.DocumentsAIService/CreateExtractionSchema": "the tenant's taxonomy, no document",
    "knowledge.v1.DocumentsAIService/ListExtractionSchemas": "the tenant's taxonomy, no document",
    "knowledge.v1.WebhookService/CreateWebhook": WEBHOOK_ADMIN,
    "knowledge.v1.WebhookService/ListWebhooks": WEBHOOK_ADMIN,
    "knowledge.v1.WebhookService/GetWebhook": WEBHOOK_ADMIN,
    "knowledge.v1.WebhookService/UpdateWebhook": WEBHOOK_ADMIN,
    "knowledge.v1.WebhookService/DeleteWebhook": WEBHOOK_ADMIN,
    "knowledge.v1.WebhookService/RotateWebhookSecret": WEBHOOK_ADMIN,
    "knowledge.v1.WebhookService/ReplayWebhook": WEBHOOK_ADMIN,
    "knowledge.v1.WebhookService/ListWebhookDeliveries": WEBHOOK_ADMIN,
    "knowledge.v1.ModelChangeService/StartModelChange": MODEL_ADMIN,
    "knowledge.v1.ModelChangeService/GetModelChange": MODEL_ADMIN,
    "knowledge.v1.ModelChangeService/SwapModel": MODEL_ADMIN,
    "knowledge.v1.ModelChangeService/RollbackModelChange": MODEL_ADMIN,
    "knowledge.v1.ModelChangeService/CancelModelChange": MODEL_ADMIN,
    "knowledge.v1.ModelChangeService/PutEvaluationSet": (
        "stores the operator's queries and judgements; its answer echoes them and reads no document"
    ),
    "knowledge.v1.ModelChangeService/DeleteEvaluationSet": "deletes an evaluation set; its answer is empty",
}


def methods() -> Iterator[str]:
    for file in (ingest_pb2, search_pb2, documents_ai_pb2):
        for service in file.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                yield f"{service.full_name}/{method.name}"


def test_every_rpc_of_every_public_service_is_called_or_exempted_with_its_reason():
    walked = set(methods())
    assert {name.partition("/")[0] for name in walked} == set(public_service_names())
    assert not set(CASES) & set(EXEMPT)
    assert walked - set(CASES) - set(EXEMPT) == set(), "a new RPC: call it in CASES, or exempt it with its reason"
    assert set(CASES) | set(EXEMPT) <= walked


def named(messages: list[protobuf_message.Message], restricted: set[str]) -> list[str]:
    """Where the answer names a restricted document: a field holding one of their ids, or any
    text holding their word or one of their filenames."""
    found: list[str] = []

    def walk(message: protobuf_message.Message, path: str) -> None:
        for field, value in message.ListFields():
            single = isinstance(value, str | bytes | int | float | protobuf_message.Message)
            values = [value] if single else list(value)  # a repeated field (a map: its keys)
            for item in values:
                where = f"{path}.{field.name}"
                if isinstance(item, protobuf_message.Message):
                    walk(item, where)
                elif isinstance(item, str):
                    if field.name.endswith("document_id") and item in restricted:
                        found.append(f"{where}={item}")
                    elif SECRET in item or "private-" in item:
                        found.append(f"{where} holds {item[:80]!r}")

    for message in messages:
        walk(message, type(message).__name__)
    return found


async def outcome(call: Call, world: World, user: str) -> tuple[list, grpc.aio.AioRpcError | None]:
    try:
        return await call(world, world.tokens[user]), None
    except grpc.aio.AioRpcError as error:
        return [], error


async def counts(world: World, name: str, messages: list, user: str) -> None:
    if name.endswith("ListCorpora"):
        (listed,) = [c for c in messages[0].corpora if c.corpus_id == world.corpus_id]
        assert listed.document_count == await world.readable_counts(user), user
    else:
        assert messages[0].document_count == await world.readable_counts(user, searchable_only=True), user


@pytest.mark.parametrize(
    ("name", "index"), [(n, i) for n, calls in CASES.items() for i in range(len(calls))], ids=lambda v: str(v)
)
async def test_no_read_shows_carl_a_document_its_list_leaves_him_out_of(stack, name, index):
    kind, call = CASES[name][index]
    for user in (*READERS, "carl"):
        if kind == "write" and user != "carl":
            continue  # a write is only tried where it must fail
        messages, error = await outcome(call, stack, user)
        if user == "carl":
            if kind in ("id", "write"):
                assert error is not None, f"{name} answered carl: {named(messages, stack.restricted)}"
                assert error.code() == grpc.StatusCode.NOT_FOUND, (name, error.code(), error.details())
                assert error_info(error).reason in NOT_FOUND_AS_ABSENT, (name, error_info(error).reason)
                continue
            assert error is None, (name, error)
            assert named(messages, stack.restricted) == [], f"{name} leaked to carl"
        else:
            if kind == "id":  # the guard let the reader through (a model or a schema may be missing after it)
                refused = error is not None and error_info(error).reason in NOT_FOUND_AS_ABSENT
                assert not refused, (name, user, error.details() if error else "")
                continue
            assert error is None, (name, user, error)
            if kind == "list":  # the restricted documents do reach their readers: this call can show them
                assert named(messages, stack.restricted), f"{name} showed {user} no restricted document"
        if kind == "count":
            await counts(stack, name, messages, user)


async def test_a_readers_list_change_shows_and_hides_the_document_at_once(stack):
    """SetDocumentAccess both ways: carl added reads it everywhere at once, removed again reads it nowhere."""
    ana, carl = stack.tokens["ana"], stack.tokens["carl"]
    search = search_pb2.SearchRequest(query=QUERY, top_k=50)
    before = await stack.search.Search(search, metadata=carl)
    assert stack.secret_id not in {r.document_id for r in before.results}
    await stack.ingest.SetDocumentAccess(
        ingest_pb2.SetDocumentAccessRequest(document_id=stack.secret_id, principals=[*LISTED, "group:finance"]),
        metadata=ana,
    )
    try:
        shared = await stack.search.Search(search, metadata=carl)
        assert stack.secret_id in {r.document_id for r in shared.results}
        got = await stack.ingest.GetDocument(ingest_pb2.GetDocumentRequest(document_id=stack.secret_id), metadata=carl)
        assert "group:finance" in got.principals
    finally:
        await stack.ingest.SetDocumentAccess(
            ingest_pb2.SetDocumentAccessRequest(document_id=stack.secret_id, principals=LISTED), metadata=ana
        )
    after = await stack.search.Search(search, metadata=carl)
    assert stack.secret_id not in {r.document_id for r in after.results}
    with pytest.raises(grpc.aio.AioRpcError) as gone:
        await stack.ingest.GetDocument(ingest_pb2.GetDocumentRequest(document_id=stack.secret_id), metadata=carl)
    assert gone.value.code() == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize(
    "mode", [search_pb2.SEARCH_MODE_VECTOR, search_pb2.SEARCH_MODE_LEXICAL, search_pb2.SEARCH_MODE_HYBRID]
)
async def test_top_k_fills_from_what_the_caller_may_read(stack, mode):
    """Ten restricted documents match better than the two open ones (the query's words again and
    again): carl still gets two results, both open, because both channels leave the restricted ones
    out inside their queries; a filter after retrieval would leave him fewer."""
    ana, carl = stack.tokens["ana"], stack.tokens["carl"]
    corpus = await stack.ingest.CreateCorpus(
        ingest_pb2.CreateCorpusRequest(name=f"topk-{mode}", default_principals=LISTED), metadata=ana
    )
    assert list(corpus.default_principals) == sorted(LISTED)
    # each mode's texts its own: the tenant holds each text once (a duplicate stays in its first corpus)
    texts = [(f"restricted {n}", f"osprey nest {mode}.{n}. " + "osprey nest heron " * 20, None) for n in range(10)]
    texts += [(f"open {n}", f"osprey nest open {mode}.{n}, by the river.", ingest_pb2.AccessList()) for n in range(2)]
    for title, text, access in texts:  # the corpus's default restricts; an explicit empty list opens
        reply = await stack.ingest.IngestText(
            ingest_pb2.IngestTextRequest(corpus_id=corpus.corpus_id, title=title, text=text, access=access),
            metadata=ana,
        )
        await wait_terminal(stack.ingest, ana, reply.job_id)
    request = search_pb2.SearchRequest(query="osprey nest heron", corpus_id=corpus.corpus_id, top_k=2, mode=mode)
    assert len((await stack.search.Search(request, metadata=ana)).results) == 2
    found = await stack.search.Search(request, metadata=carl)
    assert len(found.results) == 2
    assert all(r.filename.startswith("open") for r in found.results), [r.filename for r in found.results]
