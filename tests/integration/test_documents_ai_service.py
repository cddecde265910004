"""documents-ai with the real parts: PostgreSQL under its own role, the embedder with the real
model (types as anchors), ingest writing the documents it reads, and a real local HTTP server
speaking the chat-completions protocol as the LLM (tests/support/chat.py)."""

from __future__ import annotations

import asyncio
import json
import time

import grpc
import pytest
from knowledge.v1 import documents_ai_pb2 as pb
from knowledge.v1 import documents_ai_pb2_grpc, ingest_pb2
from knowledge_documents_ai.adapters.postgres import PostgresResults
from knowledge_documents_ai.bootstrap import build_app as documents_ai_app
from knowledge_documents_ai.config import DocumentsAiSettings
from knowledge_documents_ai.domain.model import ProcessingResult
from knowledge_ingest.bootstrap import build_app as ingest_app
from knowledge_ingest.config import IngestSettings
from knowledge_runtime.db.pool import Database
from knowledge_runtime.settings import Env

from tests.support import rpc
from tests.support.chat import ChatServer
from tests.support.ingest import upload, wait_terminal
from tests.support.real_services import base_env, ingest_env, start_backends
from tests.support.rpc import error_info

pytestmark = pytest.mark.integration

TENANT = "docai-tenant"
INVOICE = (
    "# Invoice INV-2024-017\n\n"
    "Invoice issued by Globex Corporation to Initech Ltd. Invoice number INV-2024-017, invoice date "
    "2024-03-05. Amount due: 1,250.00 EUR, payment due within 30 days by bank transfer.\n\n"
    "| item | quantity | unit price |\n|---|---|---|\n| steel bolts | 100 | 2.50 |\n| hex nuts | 400 | 0.25 |\n"
)
POLICY = (
    "# Travel policy\n\nEmployees must book trains for trips under 500 km. Managers approve every "
    "business trip in advance. The policy applies to all staff and contractors; violations are reported "
    "to human resources.\n"
)
MINUTES = (
    "# Rowing club minutes\n\nMinutes of the annual meeting of the rowing club. Present: five members. "
    "The chair opened the meeting at 7 pm; the boat shed roof will be repaired in spring.\n"
)
INVOICE_SCHEMA = {
    "type": "object",
    "properties": {
        "invoice_number": {"type": "string", "description": "the invoice's number"},
        "amount_due": {"type": "string", "description": "the amount due with its currency"},
        "issuer": {"type": "string", "description": "who issued the invoice"},
    },
    "required": ["invoice_number"],
}


def bearer(make_token, tenant=TENANT, capabilities=None, **claims):
    caps = capabilities or ["corpus.create", "corpus.read", "document.upload", "taxonomy.edit"]
    return [("authorization", f"Bearer {make_token(tenant, caps, **claims)}")]


def docai_env(pg, keys_dir, tmp, addresses, **extra: str) -> dict[str, str]:
    return {
        **base_env(pg, keys_dir, tmp, "documents-ai"),
        "KNOWLEDGE_DOCUMENTS_AI_PORT": "0",
        "KNOWLEDGE_EMBEDDER_ADDRESS": addresses["embedder"],
        **extra,
    }


@pytest.fixture(scope="module")
async def stack(migrated_pg, keys_dir, tmp_path_factory, make_token):
    """Content-index, the embedder, ingest and documents-ai (no LLM); three documents ingested."""
    tmp = tmp_path_factory.mktemp("docai")
    apps, addresses = await start_backends(migrated_pg, keys_dir, tmp)
    channel = None
    try:
        ingest = await ingest_app(IngestSettings.from_env(Env(ingest_env(migrated_pg, keys_dir, tmp, addresses, 0))))
        apps.append(ingest)
        ingest_address = f"127.0.0.1:{await ingest.start()}"
        settings = DocumentsAiSettings.from_env(Env(docai_env(migrated_pg, keys_dir, tmp, addresses)))
        docai = await documents_ai_app(settings)
        apps.append(docai)
        address = f"127.0.0.1:{await docai.start()}"
        metadata = bearer(make_token)
        cleared = bearer(make_token, clearance="CONFIDENTIAL")
        documents = {}
        async with grpc.aio.insecure_channel(ingest_address) as ingest_channel:
            ingest_stub = rpc.IngestStub(ingest_channel)
            corpus = await ingest_stub.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="docai"), metadata=metadata)
            secret = await ingest_stub.CreateCorpus(
                ingest_pb2.CreateCorpusRequest(name="docai-secret", confidentiality="CONFIDENTIAL"), metadata=cleared
            )
            for name, text, corpus_id, creator in (
                ("invoice", INVOICE, corpus.corpus_id, metadata),
                ("policy", POLICY, corpus.corpus_id, metadata),
                ("minutes", MINUTES, corpus.corpus_id, metadata),
                ("secret", INVOICE + "\nConfidential copy for the auditors.\n", secret.corpus_id, cleared),
            ):
                reply = await upload(ingest_stub, creator, corpus_id, text.encode(), f"{name}.md")
                job = await wait_terminal(ingest_stub, creator, reply.job_id, timeout=120)
                assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, job.error
                documents[name] = job.result.document_id
        channel = grpc.aio.insecure_channel(address)
        stub = documents_ai_pb2_grpc.DocumentsAIServiceStub(channel)
        for name, description in (
            ("invoice", "A bill from a supplier: invoice number, amount due, payment terms, line items."),
            ("policy", "Rules employees and staff must follow, approvals and what is allowed."),
        ):
            await stub.CreateDocumentType(
                pb.CreateDocumentTypeRequest(name=name, description=description, reason="seed"), metadata=metadata
            )
        yield {"stub": stub, "metadata": metadata, "documents": documents, "tmp": tmp, "addresses": addresses}
    finally:
        if channel is not None:
            await channel.close()
        for app in reversed(apps):
            await app.stop()


async def llm_service(migrated_pg, keys_dir, stack, url: str, model: str = "local-model"):
    env = docai_env(
        migrated_pg,
        keys_dir,
        stack["tmp"],
        stack["addresses"],
        KNOWLEDGE_LLM_URL=url,
        KNOWLEDGE_LLM_MODEL=model,
        KNOWLEDGE_LLM_PRICE_INPUT_PER_1K="0.5",
    )
    app = await documents_ai_app(DocumentsAiSettings.from_env(Env(env)))
    port = await app.start()
    return app, grpc.aio.insecure_channel(f"127.0.0.1:{port}")


async def test_the_taxonomy_is_per_tenant_versioned_and_capability_gated(stack, make_token):
    stub, metadata = stack["stub"], stack["metadata"]
    listed = await stub.ListDocumentTypes(pb.ListDocumentTypesRequest(), metadata=metadata)
    assert [t.name for t in listed.document_types] == ["invoice", "policy"]
    assert listed.document_types[0].added_by == "dev" and listed.document_types[0].origin == "person"
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.CreateDocumentType(pb.CreateDocumentTypeRequest(name="invoice", description="x"), metadata=metadata)
    assert caught.value.code() == grpc.StatusCode.ALREADY_EXISTS
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.CreateDocumentType(pb.CreateDocumentTypeRequest(name="Bad Name", description="x"), metadata=metadata)
    assert (
        caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT and error_info(caught.value).reason == "INVALID_REQUEST"
    )
    schema_text = json.dumps(INVOICE_SCHEMA)
    first = await stub.CreateExtractionSchema(
        pb.CreateExtractionSchemaRequest(type_name="invoice", json_schema=schema_text), metadata=metadata
    )
    second = await stub.CreateExtractionSchema(
        pb.CreateExtractionSchemaRequest(type_name="invoice", json_schema=schema_text), metadata=metadata
    )
    assert (first.schema.version, second.schema.version) == (1, 2)
    schemas = await stub.ListExtractionSchemas(pb.ListExtractionSchemasRequest(type_name="invoice"), metadata=metadata)
    assert [s.version for s in schemas.schemas] == [2, 1]
    assert json.loads(schemas.schemas[0].json_schema) == INVOICE_SCHEMA
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        bad = {"type": "object", "properties": {"x": {"type": "string"}}}  # no description
        await stub.CreateExtractionSchema(
            pb.CreateExtractionSchemaRequest(type_name="invoice", json_schema=json.dumps(bad)), metadata=metadata
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "description" in caught.value.details()
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.ListExtractionSchemas(pb.ListExtractionSchemasRequest(type_name="nothing"), metadata=metadata)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    reader = bearer(make_token, capabilities=["corpus.read"])
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.CreateDocumentType(pb.CreateDocumentTypeRequest(name="memo", description="x"), metadata=reader)
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED and "taxonomy.edit" in caught.value.details()
    other = await stub.ListDocumentTypes(pb.ListDocumentTypesRequest(), metadata=bearer(make_token, "other-tenant"))
    assert list(other.document_types) == []


async def test_classification_by_the_real_embedder_cites_the_documents_chunks(stack, migrated_pg):
    stub, metadata, documents = stack["stub"], stack["metadata"], stack["documents"]
    reply = await stub.ClassifyDocument(pb.ClassifyDocumentRequest(document_id=documents["invoice"]), metadata=metadata)
    assert reply.type_name == "invoice" and reply.decided_by == "embedding", reply
    assert reply.confidence > 0.5 and {a.type_name for a in reply.alternatives} == {"policy", "unclassified"}
    admin = await Database.connect(migrated_pg.url())
    try:
        chunk_ids = {
            str(r["chunk_id"])
            for r in await admin.fetch(
                "t", "SELECT chunk_id FROM chunks WHERE document_id = $1", int(documents["invoice"])
            )
        }
    finally:
        await admin.close()
    assert reply.evidence and {e.chunk_id for e in reply.evidence} <= chunk_ids
    assert reply.card.kind == "classification_result" and "invoice" in reply.card.title
    policy = await stub.ClassifyDocument(pb.ClassifyDocumentRequest(document_id=documents["policy"]), metadata=metadata)
    assert policy.type_name == "policy"
    text = await stub.ClassifyDocument(
        pb.ClassifyDocumentRequest(text="Invoice number 7: amount due 90 EUR, payment within 14 days."),
        metadata=metadata,
    )
    assert text.type_name == "invoice" and not text.evidence


async def test_a_document_outside_the_callers_reach_or_tenant_is_not_found(stack, make_token):
    stub, metadata, documents = stack["stub"], stack["metadata"], stack["documents"]
    for request_metadata, document_id in (
        (metadata, documents["secret"]),  # a CONFIDENTIAL corpus, a TENANT clearance
        (bearer(make_token, "other-tenant"), documents["invoice"]),
        (metadata, "not-an-id"),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.ClassifyDocument(pb.ClassifyDocumentRequest(document_id=document_id), metadata=request_metadata)
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND, document_id
    cleared = bearer(make_token, clearance="CONFIDENTIAL")
    reply = await stub.ClassifyDocument(pb.ClassifyDocumentRequest(document_id=documents["secret"]), metadata=cleared)
    assert reply.type_name == "invoice"
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.ClassifyDocument(pb.ClassifyDocumentRequest(), metadata=metadata)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_a_deleted_document_pending_removal_is_not_found(stack, migrated_pg):
    stub, metadata, documents = stack["stub"], stack["metadata"], stack["documents"]
    admin = await Database.connect(migrated_pg.url())
    mark = "UPDATE documents SET deleted_at = {} WHERE document_id = $1"
    try:
        await admin.execute("t", mark.format("now()"), int(documents["policy"]))
        for call, request in (
            (stub.ClassifyDocument, pb.ClassifyDocumentRequest(document_id=documents["policy"])),
            (stub.ProcessDocument, pb.ProcessDocumentRequest(document_id=documents["policy"])),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await call(request, metadata=metadata)
            assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        await admin.execute("t", mark.format("NULL"), int(documents["policy"]))
        await admin.close()


async def test_schemaless_extraction_measures_the_tables_and_schema_extraction_needs_a_model(stack):
    stub, metadata, documents = stack["stub"], stack["metadata"], stack["documents"]
    reply = await stub.ExtractDocument(pb.ExtractDocumentRequest(document_id=documents["invoice"]), metadata=metadata)
    (table,) = reply.tables
    assert [(c.name, c.type) for c in table.columns] == [
        ("item", "text"),
        ("quantity", "integer"),
        ("unit price", "number"),
    ]
    assert [json.loads(r) for r in table.rows_json] == [["steel bolts", 100, 2.5], ["hex nuts", 400, 0.25]]
    assert reply.card.kind == "extraction_result" and not reply.fields
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.ExtractDocument(
            pb.ExtractDocumentRequest(document_id=documents["invoice"], schema_name="invoice"), metadata=metadata
        )
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    assert error_info(caught.value).reason == "RUNTIME_UNAVAILABLE" and "KNOWLEDGE_LLM_URL" in caught.value.details()


async def test_schema_extraction_retries_keeps_only_evidenced_values_and_records_its_cost(stack, migrated_pg, keys_dir):
    documents, metadata = stack["documents"], stack["metadata"]
    admin = await Database.connect(migrated_pg.url())
    try:
        chunk_id = await admin.fetchval(
            "t",
            "SELECT chunk_id FROM chunks WHERE document_id = $1 AND content LIKE '%INV-2024-017,%'",
            int(documents["invoice"]),
        )
        good = {
            "values": [
                {"field": "invoice_number", "value": "INV-2024-017", "chunk_id": chunk_id, "quote": "INV-2024-017"},
                {"field": "issuer", "value": "Globex", "chunk_id": chunk_id, "quote": "issued by Umbrella Corp"},
            ]
        }
        with ChatServer(answers=["Sure! Here it is.", json.dumps(good)]) as server:
            app, channel = await llm_service(migrated_pg, keys_dir, stack, server.url)
            try:
                stub = documents_ai_pb2_grpc.DocumentsAIServiceStub(channel)
                reply = await stub.ExtractDocument(
                    pb.ExtractDocumentRequest(
                        document_id=documents["invoice"], schema_name="invoice", schema_version=1
                    ),
                    metadata=metadata,
                )
            finally:
                await channel.close()
                await app.stop()
        costs = await admin.fetch(
            "t",
            "SELECT model, operation, tokens FROM cost_records WHERE tenant_id = $1 AND model = 'local-model'",
            TENANT,
        )
    finally:
        await admin.close()
    assert reply.attempts == 2 and reply.schema_version == 1
    assert "the answer is not JSON" in server.requests[1]["messages"][1]["content"]
    assert server.requests[0]["response_format"] == {"type": "json_object"}
    (field,) = reply.fields
    assert (field.name, json.loads(field.value_json), field.evidence.chunk_id) == (
        "invoice_number",
        "INV-2024-017",
        str(chunk_id),
    )
    assert [(d.name, d.why) for d in reply.dropped] == [("issuer", f"quote not found in chunk {chunk_id}")]
    assert len(costs) >= 2 and all(c["operation"] == "chat" and c["tokens"] == 150 for c in costs)
    assert reply.cost.amount == pytest.approx(2 * 0.12 * 0.5)


async def test_processing_is_durable_idempotent_and_an_unclassified_proposal_without_a_model(stack):
    stub, metadata, documents = stack["stub"], stack["metadata"], stack["documents"]
    request = pb.ProcessDocumentRequest(document_id=documents["minutes"])
    first = await stub.ProcessDocument(request, metadata=metadata)
    result = first.result
    assert not first.existing and result.type_name == "unclassified" and result.schema_version == 0
    assert any("KNOWLEDGE_LLM_URL" in note for note in result.notes)
    assert len(result.content_hash) == 64 and result.run_by == "dev"
    again = await stub.ProcessDocument(request, metadata=metadata)
    assert again.existing and again.result.result_id == result.result_id
    listed = await stub.ListProcessingResults(
        pb.ListProcessingResultsRequest(document_id=documents["minutes"]), metadata=metadata
    )
    assert [r.result_id for r in listed.results] == [result.result_id]
    types = await stub.ListDocumentTypes(pb.ListDocumentTypesRequest(), metadata=metadata)
    assert "unclassified" not in {t.name for t in types.document_types}


async def test_processing_with_a_model_grows_the_taxonomy_reversibly(stack, migrated_pg, keys_dir):
    documents, metadata = stack["documents"], stack["metadata"]
    schema = {"type": "object", "properties": {"club": {"type": "string", "description": "the club"}}}
    admin = await Database.connect(migrated_pg.url())
    try:
        chunk_id = await admin.fetchval(
            "t", "SELECT min(chunk_id) FROM chunks WHERE document_id = $1", int(documents["minutes"])
        )
    finally:
        await admin.close()
    claims = {"values": [{"field": "club", "value": "rowing club", "chunk_id": chunk_id, "quote": "the rowing club"}]}
    answers = [
        "unclassified",
        json.dumps({"name": "meeting_minutes", "description": "Minutes of a club or committee meeting."}),
        json.dumps(schema),
        json.dumps(claims),
    ]
    with ChatServer(answers=answers) as server:
        app, channel = await llm_service(migrated_pg, keys_dir, stack, server.url)
        try:
            stub = documents_ai_pb2_grpc.DocumentsAIServiceStub(channel)
            reply = await stub.ProcessDocument(
                pb.ProcessDocumentRequest(document_id=documents["minutes"]), metadata=metadata
            )
            types = await stub.ListDocumentTypes(pb.ListDocumentTypesRequest(), metadata=metadata)
            proposed = next(t for t in types.document_types if t.name == "meeting_minutes")
            retired = await stub.RetireDocumentType(
                pb.RetireDocumentTypeRequest(type_name="meeting_minutes"), metadata=metadata
            )
            active = await stub.ListDocumentTypes(pb.ListDocumentTypesRequest(), metadata=metadata)
            await stub.RestoreDocumentType(
                pb.RestoreDocumentTypeRequest(type_name="meeting_minutes"), metadata=metadata
            )
        finally:
            await channel.close()
            await app.stop()
    result = reply.result
    assert result.type_name == "meeting_minutes" and result.proposed_type and result.schema_version == 1
    assert result.model == "local-model" and len(result.cost.items) == 4
    (field,) = result.fields
    assert field.evidence.chunk_id == str(chunk_id) and field.evidence.quote == "the rowing club"
    assert proposed.origin == "proposal" and proposed.proposed_for_document_id == documents["minutes"]
    assert proposed.schema_version == 1 and "proposed for document" in proposed.reason
    assert retired.document_type.retired and "meeting_minutes" not in {t.name for t in active.document_types}


async def test_a_stored_result_is_keyed_by_its_type_as_well_as_its_schema_version(stack, migrated_pg):
    db = await Database.connect(migrated_pg.url(user="knowledge_documents_ai"), max_size=1)
    results = PostgresResults(db)
    try:
        kept = {}
        for type_name in ("unclassified", "policy", "policy"):
            result = ProcessingResult(int(stack["documents"]["policy"]), "ab" * 32, type_name, 0.5, False, 0, {})
            kept[type_name] = await results.add(TENANT, result)
    finally:
        await db.close()
    (unclassified, was_stored), (policy, existed) = kept["unclassified"], kept["policy"]
    assert not was_stored and unclassified.type_name == "unclassified"
    assert existed and policy.type_name == "policy" and policy.result_id != unclassified.result_id


async def test_a_spent_llm_budget_refuses_processing_before_the_model_is_called(stack, migrated_pg, keys_dir):
    documents, metadata = stack["documents"], stack["metadata"]
    admin = await Database.connect(migrated_pg.url())
    await admin.execute(
        "t", "INSERT INTO tenant_settings (tenant_id, enabled, max_llm_cost_per_month) VALUES ($1, true, 0)", TENANT
    )
    try:
        with ChatServer(answers=["invoice"]) as server:
            app, channel = await llm_service(migrated_pg, keys_dir, stack, server.url)
            try:
                stub = documents_ai_pb2_grpc.DocumentsAIServiceStub(channel)
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await stub.ProcessDocument(
                        pb.ProcessDocumentRequest(document_id=documents["invoice"]), metadata=metadata
                    )
            finally:
                await channel.close()
                await app.stop()
    finally:
        await admin.execute("t", "DELETE FROM tenant_settings WHERE tenant_id = $1", TENANT)
        await admin.close()
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error_info(caught.value).reason == "BUDGET_EXHAUSTED" and not server.requests


async def test_the_service_role_reads_chunks_and_cannot_write_them(migrated_pg):
    import asyncpg

    db = await Database.connect(migrated_pg.url(user="knowledge_documents_ai"), max_size=1)
    try:
        assert await db.fetchval("t", "SELECT count(*) FROM chunks") >= 0
        for sql in ("UPDATE chunks SET content = ''", "DELETE FROM documents", "UPDATE documents SET filename = ''"):
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await db.execute("t", sql)
    finally:
        await db.close()


def _nested_properties(levels: int) -> str:
    spec: dict = {"type": "string", "description": "the leaf"}
    for _ in range(levels):
        spec = {"type": "object", "description": "a level", "properties": {"x": spec}}
    return json.dumps({"type": "object", "properties": {"x": spec}})


def _code_schema(**spec) -> str:
    return json.dumps({"type": "object", "properties": {"code": {"type": "string", "description": "the code", **spec}}})


async def test_deep_schemas_are_refused_naming_the_limit_and_the_service_answers_on(stack):
    stub, metadata = stack["stub"], stack["metadata"]
    listed = pb.ListExtractionSchemasRequest(type_name="policy")
    before = await stub.ListExtractionSchemas(listed, metadata=metadata)
    for shape, text in (
        ("properties nested 200 deep", _nested_properties(200)),
        ("arrays nested 49,000 deep", "[" * 49_000 + "]" * 49_000),
        ("a pattern of 5,000 nested groups", _code_schema(pattern="(" * 5_000 + "a" + ")" * 5_000)),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.CreateExtractionSchema(
                pb.CreateExtractionSchemaRequest(type_name="policy", json_schema=text), metadata=metadata
            )
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (shape, caught.value.details())
        info = error_info(caught.value)
        assert info.reason == "INVALID_REQUEST" and info.metadata["field"] == "json_schema", shape
        assert "deeper than 32 levels" in caught.value.details(), shape
    after = await stub.ListExtractionSchemas(listed, metadata=metadata)
    assert [s.version for s in after.schemas] == [s.version for s in before.schemas]  # nothing stored
    types = await stub.ListDocumentTypes(pb.ListDocumentTypesRequest(), metadata=metadata)
    assert {"invoice", "policy"} <= {t.name for t in types.document_types}


async def test_a_catastrophic_pattern_cannot_stall_another_tenants_calls(stack, migrated_pg, keys_dir, make_token):
    stub, metadata, documents = stack["stub"], stack["metadata"], stack["documents"]
    await stub.CreateDocumentType(
        pb.CreateDocumentTypeRequest(name="ticket", description="A support ticket and its code.", reason="test"),
        metadata=metadata,
    )
    bystander = bearer(make_token, "bystander-tenant")
    # Python's re needs seconds for this value against ^(a+)+$, doubling with every further "a".
    hostile = json.dumps({"values": [{"field": "code", "value": "a" * 26 + "!", "chunk_id": 1, "quote": "a"}]})
    latencies: list[float] = []
    try:
        await stub.CreateExtractionSchema(
            pb.CreateExtractionSchemaRequest(type_name="ticket", json_schema=_code_schema(pattern="^(a+)+$")),
            metadata=metadata,
        )
        with ChatServer(answer=hostile) as server:
            app, channel = await llm_service(migrated_pg, keys_dir, stack, server.url)
            try:
                served = documents_ai_pb2_grpc.DocumentsAIServiceStub(channel)
                extraction = asyncio.ensure_future(
                    served.ExtractDocument(
                        pb.ExtractDocumentRequest(document_id=documents["invoice"], schema_name="ticket"),
                        metadata=metadata,
                    )
                )
                while not extraction.done():  # the other tenant's calls, to the same service meanwhile
                    started = time.monotonic()
                    await served.ListDocumentTypes(pb.ListDocumentTypesRequest(), metadata=bystander)
                    latencies.append(time.monotonic() - started)
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await extraction
            finally:
                await channel.close()
                await app.stop()
    finally:  # out of classification again: the model tests below choose among the other types
        await stub.RetireDocumentType(pb.RetireDocumentTypeRequest(type_name="ticket"), metadata=metadata)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(caught.value).reason == "EXTRACTION_INVALID" and "does not match" in caught.value.details()
    assert len(server.requests) == 3  # each answer checked, and told to the model, as any invalid one
    assert latencies and max(latencies) < 1.0, latencies


# ---- contract tests against a real llama.cpp server with the tiny SmolLM2-135M (local_llm) ----
# The tiny model says whatever it says; these assert what the service promises of ANY model's
# output: an answer is accepted only when valid, a bounded number of attempts is made (each one a
# cost record with the server's token counts), then a clear refusal; no value without its quote
# in the cited chunk; a classification names a candidate or is refused and the embedding's kept.


async def chunk_texts(migrated_pg, document_id: str) -> dict[str, str]:
    admin = await Database.connect(migrated_pg.url())
    try:
        rows = await admin.fetch("t", "SELECT chunk_id, content FROM chunks WHERE document_id = $1", int(document_id))
    finally:
        await admin.close()
    return {str(r["chunk_id"]): r["content"] for r in rows}


async def chat_costs(migrated_pg, model: str) -> list:
    admin = await Database.connect(migrated_pg.url())
    try:
        return await admin.fetch(
            "t", "SELECT tokens FROM cost_records WHERE tenant_id = $1 AND model = $2", TENANT, model
        )
    finally:
        await admin.close()


async def test_schema_extraction_by_a_real_model_is_valid_and_evidenced_or_refused(
    stack, migrated_pg, keys_dir, local_llm
):
    documents, metadata = stack["documents"], stack["metadata"]
    before = len(await chat_costs(migrated_pg, local_llm.model))
    app, channel = await llm_service(migrated_pg, keys_dir, stack, local_llm.base_url, local_llm.model)
    try:
        stub = documents_ai_pb2_grpc.DocumentsAIServiceStub(channel)
        created = await stub.CreateExtractionSchema(
            pb.CreateExtractionSchemaRequest(type_name="invoice", json_schema=json.dumps(INVOICE_SCHEMA)),
            metadata=metadata,
        )
        request = pb.ExtractDocumentRequest(
            document_id=documents["invoice"], schema_name="invoice", schema_version=created.schema.version
        )
        try:
            reply = await stub.ExtractDocument(request, metadata=metadata, timeout=600)
        except grpc.aio.AioRpcError as error:  # three invalid answers: the clear refusal
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
            assert error_info(error).reason == "EXTRACTION_INVALID" and "after 3 attempts" in error.details()
            attempts = 3
        else:
            attempts = reply.attempts
            assert 1 <= attempts <= 3 and reply.card.kind == "extraction_result"
            chunks = await chunk_texts(migrated_pg, documents["invoice"])
            for field in reply.fields:  # no value without its quote in the chunk it cites
                assert field.name in INVOICE_SCHEMA["properties"]
                assert (
                    " ".join(field.evidence.quote.split()).casefold()
                    in " ".join(chunks[field.evidence.chunk_id].split()).casefold()
                )
            assert len(reply.cost.items) == attempts and all(i.input_tokens > 0 for i in reply.cost.items)
    finally:
        await channel.close()
        await app.stop()
    costs = await chat_costs(migrated_pg, local_llm.model)
    assert len(costs) - before == attempts and all(c["tokens"] > 0 for c in costs)


async def test_classification_by_a_real_model_names_a_candidate_or_is_refused(stack, migrated_pg, keys_dir, local_llm):
    documents, metadata = stack["documents"], stack["metadata"]
    app, channel = await llm_service(migrated_pg, keys_dir, stack, local_llm.base_url, local_llm.model)
    try:
        stub = documents_ai_pb2_grpc.DocumentsAIServiceStub(channel)
        reply = await stub.ClassifyDocument(
            pb.ClassifyDocumentRequest(document_id=documents["invoice"]), metadata=metadata, timeout=600
        )
    finally:
        await channel.close()
        await app.stop()
    candidates = {"invoice", "policy", "unclassified", "meeting_minutes"}
    assert reply.type_name in candidates
    if reply.decided_by == "llm":
        assert not reply.refused_llm_answer
    else:  # the model named none of the candidates: refused, and the embedding's answer kept
        assert reply.decided_by == "embedding" and reply.refused_llm_answer and reply.type_name == "invoice"
    assert len(reply.cost.items) == 1 and reply.cost.items[0].model_id == local_llm.model
