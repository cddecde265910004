"""The shared runtime around a real service: a gRPC server on port 0 over real PostgreSQL."""

import json

import grpc
import pytest
from google.rpc import code_pb2, status_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from knowledge.v1 import ingest_pb2, ingest_pb2_grpc
from knowledge_ingest.api.servicer import IngestServicer, service_spec
from knowledge_ingest.bootstrap import wire
from knowledge_ingest.config import IngestSettings
from knowledge_runtime import clients
from knowledge_runtime.auth import bind_scope, reset_scope, scope_from_claims
from knowledge_runtime.db.pool import Database
from knowledge_runtime.logging import configure_logging
from knowledge_runtime.server import GrpcApp
from knowledge_runtime.settings import Env
from knowledge_runtime.tracing import configure_tracing, tracer

from tests.conftest import auth, error_info

pytestmark = pytest.mark.integration

SECRET = "password=hunter2 at /srv/secret/path"


class ExplodingServicer(IngestServicer):
    async def ListCorpora(self, request, context):
        raise RuntimeError(SECRET)

    async def GetPromptContext(self, request, context):
        raise NotImplementedError


def servicer_for(db: Database, kind: type[IngestServicer] = IngestServicer) -> IngestServicer:
    """The real ingest servicer (its corpus RPCs are what these tests exercise)."""
    wired, _ = wire(IngestSettings.from_env(Env({})), db, blobs=None, embedder=None, extract=None)
    return kind(wired._corpora, wired._documents, wired._uploads, wired._jobs)


@pytest.fixture(scope="module")
async def ingest_server(migrated_pg, verifier):
    configure_tracing("test", None)
    db = await Database.connect(migrated_pg.url(user="knowledge_ingest"))
    app = GrpcApp(services=[service_spec(servicer_for(db))], verifier=verifier)
    port = await app.start()
    yield f"127.0.0.1:{port}"
    await app.stop()
    await db.close()


@pytest.fixture
async def stub(ingest_server):
    async with grpc.aio.insecure_channel(ingest_server) as channel:
        yield ingest_pb2_grpc.IngestServiceStub(channel)


async def test_health_and_reflection(ingest_server):
    async with grpc.aio.insecure_channel(ingest_server) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for name in ("", "knowledge.v1.IngestService"):
            reply = await health.Check(health_pb2.HealthCheckRequest(service=name))
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        reflect = reflection_pb2_grpc.ServerReflectionStub(channel)
        call = reflect.ServerReflectionInfo()
        await call.write(reflection_pb2.ServerReflectionRequest(list_services=""))
        reply = await call.read()
        await call.done_writing()
        names = {s.name for s in reply.list_services_response.service}
        assert "knowledge.v1.IngestService" in names


async def test_no_token_is_unauthenticated(stub):
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.ListCorpora(ingest_pb2.ListCorporaRequest())
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    info = error_info(caught.value)
    assert (info.reason, info.domain) == ("TOKEN_MISSING", "knowledge.v1")


async def test_a_forged_token_is_unauthenticated(stub, make_token):
    token = make_token("tenant-a")
    header, payload, signature = token.split(".")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.ListCorpora(ingest_pb2.ListCorporaRequest(), metadata=auth(f"{header}.{payload}.{signature[::-1]}"))
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_a_missing_capability_is_permission_denied_naming_it(stub, make_token):
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="x"), metadata=auth(make_token("t", ["search"])))
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "corpus.create" in caught.value.details()
    assert error_info(caught.value).metadata["capability"] == "corpus.create"


async def test_corpora_are_per_tenant_and_names_unique(stub, make_token):
    owner, other = auth(make_token("tenant-owner")), auth(make_token("tenant-other"))
    created = await stub.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="Policies", description="HR"), metadata=owner)
    assert created.corpus_id and created.name == "Policies" and created.create_time.seconds > 0
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="Policies"), metadata=owner)
    assert caught.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert error_info(caught.value).reason == "CORPUS_ALREADY_EXISTS"
    # The same name in another tenant is a different corpus; neither sees the other's.
    await stub.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="Policies"), metadata=other)
    mine = await stub.ListCorpora(ingest_pb2.ListCorporaRequest(), metadata=owner)
    theirs = await stub.ListCorpora(ingest_pb2.ListCorporaRequest(), metadata=other)
    assert [c.corpus_id for c in mine.corpora] == [created.corpus_id]
    assert len(theirs.corpora) == 1 and theirs.corpora[0].corpus_id != created.corpus_id


async def test_listing_paginates(stub, make_token):
    metadata = auth(make_token("tenant-pages"))
    for i in range(5):
        await stub.CreateCorpus(ingest_pb2.CreateCorpusRequest(name=f"c{i}"), metadata=metadata)
    seen, token = [], ""
    for _ in range(5):
        page = await stub.ListCorpora(ingest_pb2.ListCorporaRequest(page_size=2, page_token=token), metadata=metadata)
        seen += [c.name for c in page.corpora]
        token = page.next_page_token
        if not token:
            break
    assert seen == ["c0", "c1", "c2", "c3", "c4"]


async def test_an_unexpected_exception_is_internal_without_internals(migrated_pg, verifier, make_token):
    db = await Database.connect(migrated_pg.url(user="knowledge_ingest"))
    app = GrpcApp(services=[service_spec(servicer_for(db, ExplodingServicer))], verifier=verifier)
    port = await app.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await ingest_pb2_grpc.IngestServiceStub(channel).ListCorpora(
                    ingest_pb2.ListCorporaRequest(), metadata=auth(make_token("t"))
                )
            with pytest.raises(grpc.aio.AioRpcError) as unimplemented:
                await ingest_pb2_grpc.IngestServiceStub(channel).GetPromptContext(
                    ingest_pb2.GetPromptContextRequest(), metadata=auth(make_token("t"))
                )
    finally:
        await app.stop()
        await db.close()
    error = caught.value
    assert unimplemented.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert error.code() == grpc.StatusCode.INTERNAL
    assert error.details() == "internal error"
    assert error_info(error).reason == "INTERNAL"
    # The google.rpc.Status the gateway turns into the JSON body: its code is the call's (13, 12), never 9.
    for failed, code in ((error, code_pb2.INTERNAL), (unimplemented.value, code_pb2.UNIMPLEMENTED)):
        status = status_pb2.Status.FromString(dict(failed.trailing_metadata())["grpc-status-details-bin"])
        assert status.code == code == failed.code().value[0]
    everything = error.details() + repr(error.trailing_metadata()) + repr(error.debug_error_string())
    assert "hunter2" not in everything and "Traceback" not in everything


async def test_logs_carry_request_context_and_the_propagated_trace(ingest_server, make_token, capsys):
    configure_logging("ingest", "info")
    token = make_token("tenant-logs")
    scope_tokens = bind_scope(scope_from_claims({"tenant": "tenant-logs"}), token)
    try:
        with tracer("test").start_as_current_span("caller") as span:
            trace_id = format(span.get_span_context().trace_id, "032x")
            channel = clients.channel(ingest_server)  # forwards the bound token and traceparent
            try:
                await ingest_pb2_grpc.IngestServiceStub(channel).ListCorpora(
                    ingest_pb2.ListCorporaRequest(), metadata=[("x-request-id", "req-123")]
                )
            finally:
                await channel.close()
    finally:
        reset_scope(scope_tokens)
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    finished = [line for line in lines if line.get("event") == "rpc_finished"]
    assert finished, lines
    entry = finished[-1]
    assert entry["request_id"] == "req-123"
    assert entry["tenant"] == "tenant-logs"
    assert entry["rpc"] == "/knowledge.v1.IngestService/ListCorpora"
    assert entry["code"] == "OK"
    assert entry["trace_id"] == trace_id
    assert token not in json.dumps(lines)
