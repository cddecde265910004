"""The shared runtime around a real service: a gRPC server on port 0 over real PostgreSQL."""

import json
import time

import grpc
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from google.api import httpbody_pb2
from google.rpc import code_pb2, status_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2
from knowledge.v1 import ingest_pb2
from knowledge_ingest.config import IngestSettings
from knowledge_ingest.corpora import api as corpora_api
from knowledge_ingest.corpora.api import CorpusServicer
from knowledge_ingest.documents import api as documents_api
from knowledge_ingest.documents.api import DocumentServicer
from knowledge_runtime import clients
from knowledge_runtime.auth import bind_scope, reset_scope, scope_from_claims
from knowledge_runtime.db.pool import Database
from knowledge_runtime.devkeys import KEY_ID_FILE, PRIVATE_KEY_FILE
from knowledge_runtime.logging import configure_logging
from knowledge_runtime.server import GrpcApp, ServiceSpec
from knowledge_runtime.settings import Env
from knowledge_runtime.tracing import configure_tracing, tracer

from tests.support import rpc
from tests.support.ingest import wire_fakes
from tests.support.rpc import auth, error_info

pytestmark = pytest.mark.integration

SECRET = "password=hunter2 at /srv/secret/path"


class ExplodingCorpora(CorpusServicer):
    async def ListCorpora(self, request, context):
        raise RuntimeError(SECRET)


class UnfinishedDocuments(DocumentServicer):
    async def GetPromptContext(self, request, context):
        raise NotImplementedError


def services_for(db: Database) -> list[ServiceSpec]:
    """The real ingest services (no job runs in these tests: their ports are left out)."""
    return wire_fakes(IngestSettings.from_env(Env({})), db, None, None, None).services


@pytest.fixture(scope="module")
async def ingest_server(migrated_pg, verifier):
    configure_tracing("test", None)
    db = await Database.connect(migrated_pg.url(user="knowledge_ingest"))
    app = GrpcApp(services=services_for(db), verifier=verifier)
    port = await app.start()
    yield f"127.0.0.1:{port}"
    await app.stop()
    await db.close()


@pytest.fixture
async def stub(ingest_server):
    async with grpc.aio.insecure_channel(ingest_server) as channel:
        yield rpc.IngestStub(channel)


async def test_health_without_a_token(ingest_server):
    async with grpc.aio.insecure_channel(ingest_server) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for name in ("", "knowledge.v1.CorpusService", "knowledge.v1.EventService"):
            reply = await health.Check(health_pb2.HealthCheckRequest(service=name))
            assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def reflect(channel, path: str, request: reflection_pb2.ServerReflectionRequest, token: str | None):
    """One request over the reflection stream at ``path`` (v1 and v1alpha are the same messages)."""
    stream = channel.stream_stream(
        path,
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )
    call = stream(metadata=auth(token) if token else None)
    await call.write(request)
    await call.done_writing()
    return await call.read()


@pytest.mark.parametrize("version", ["v1", "v1alpha"])
async def test_reflection_in_both_versions_behind_the_token(ingest_server, make_token, version):
    path = f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo"
    listing = reflection_pb2.ServerReflectionRequest(list_services="")
    async with grpc.aio.insecure_channel(ingest_server) as channel:
        reply = await reflect(channel, path, listing, make_token("tenant-a", ["search"]))  # no capability needed
        names = {s.name for s in reply.list_services_response.service}
        assert {"knowledge.v1.CorpusService", "knowledge.v1.IngestJobService"} <= names
        assert {"grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"} <= names
        described = await reflect(
            channel,
            path,
            reflection_pb2.ServerReflectionRequest(file_containing_symbol="grpc.reflection.v1.ServerReflection"),
            make_token("tenant-a"),
        )
        assert described.file_descriptor_response.file_descriptor_proto  # a tool can describe v1 itself
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await reflect(channel, path, listing, None)
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert error_info(caught.value).reason == "TOKEN_MISSING"
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await reflect(channel, path, listing, make_token("tenant-a", ttl_s=-120))
        assert error_info(caught.value).reason == "TOKEN_EXPIRED"


async def test_reflection_can_be_switched_off(migrated_pg, verifier, make_token):
    db = await Database.connect(migrated_pg.url(user="knowledge_ingest"))
    app = GrpcApp(services=services_for(db), verifier=verifier, serve_reflection=False)
    port = await app.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await reflect(
                    channel,
                    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
                    reflection_pb2.ServerReflectionRequest(list_services=""),
                    make_token("tenant-a"),
                )
            assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
    finally:
        await app.stop()
        await db.close()


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


async def test_hostile_signed_tokens_are_unauthenticated_without_a_traceback(stub, keys_dir, capsys):
    """At a real service: each is 401, none an INTERNAL with a traceback."""
    kid = (keys_dir / KEY_ID_FILE).read_text().strip()
    claims = {
        "iss": "knowledge-dev",
        "aud": "knowledge",
        "exp": int(time.time()) + 60,
        "tenant": "acme",
        "capabilities": ["corpus.read"],
    }
    rsa = (keys_dir / PRIVATE_KEY_FILE).read_bytes()
    tokens = {
        "es256-real-kid": jwt.encode(
            claims, ec.generate_private_key(ec.SECP256R1()), algorithm="ES256", headers={"kid": kid}
        ),
        "capabilities-object": jwt.encode(
            {**claims, "capabilities": {"corpus.read": False}}, rsa, algorithm="RS256", headers={"kid": kid}
        ),
        "nul-tenant": jwt.encode({**claims, "tenant": "acme\x00"}, rsa, algorithm="RS256", headers={"kid": kid}),
        "crlf-tenant": jwt.encode(
            {**claims, "tenant": "acme\r\nx-evil: 1"}, rsa, algorithm="RS256", headers={"kid": kid}
        ),
    }
    for name, token in tokens.items():
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.ListCorpora(ingest_pb2.ListCorporaRequest(), metadata=auth(token))
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED, name
        assert error_info(caught.value).reason == "TOKEN_INVALID", name
    assert "Traceback" not in capsys.readouterr().err


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
    exploding = [
        corpora_api.service_spec(ExplodingCorpora(None, None)),  # type: ignore[arg-type]  # never reached
        documents_api.service_spec(UnfinishedDocuments(None, None)),  # type: ignore[arg-type]
    ]
    app = GrpcApp(services=exploding, verifier=verifier)
    port = await app.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await rpc.IngestStub(channel).ListCorpora(
                    ingest_pb2.ListCorporaRequest(), metadata=auth(make_token("t"))
                )
            with pytest.raises(grpc.aio.AioRpcError) as unimplemented:
                await rpc.IngestStub(channel).GetPromptContext(
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
                await rpc.IngestStub(channel).ListCorpora(
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
    assert entry["rpc"] == "/knowledge.v1.CorpusService/ListCorpora"
    assert entry["code"] == "OK"
    assert entry["trace_id"] == trace_id
    assert token not in json.dumps(lines)


def with_unknown_field(message, number: int = 111):
    """``message`` as a client built from another proto (a misspelt or newer field) sends it."""
    tag, encoded = number << 3, b""  # wire type 0 (varint)
    while tag >= 0x80:
        encoded, tag = encoded + bytes([tag & 0x7F | 0x80]), tag >> 7
    return type(message).FromString(message.SerializeToString() + encoded + bytes([tag, 1]))


async def test_a_request_with_an_unknown_field_is_invalid_argument(stub, make_token):
    """gRPC callers: told, not ignored; and nothing is written."""
    metadata = auth(make_token("tenant-unknown-field"))
    for request, call in (
        (with_unknown_field(ingest_pb2.CreateCorpusRequest(name="Unknown")), stub.CreateCorpus),
        (with_unknown_field(ingest_pb2.ListCorporaRequest(page_size=5), number=7), stub.ListCorpora),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call(request, metadata=metadata)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_info(caught.value).reason == "UNKNOWN_FIELD"
        assert error_info(caught.value).metadata["field"].startswith("#")
    assert not (await stub.ListCorpora(ingest_pb2.ListCorporaRequest(), metadata=metadata)).corpora


async def test_a_stream_message_with_an_unknown_field_is_invalid_argument(stub, make_token):
    async def messages():
        yield with_unknown_field(ingest_pb2.UploadDocumentRequest(corpus_id="1", filename="a.txt"))

    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.UploadDocument(messages(), metadata=auth(make_token("tenant-unknown-stream")))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(caught.value).reason == "UNKNOWN_FIELD"


@pytest.mark.parametrize(
    ("call", "request_", "field"),
    [
        ("CreateCorpus", ingest_pb2.CreateCorpusRequest(name="a\x00b"), "name"),
        ("CreateCorpus", ingest_pb2.CreateCorpusRequest(name="ok", description="\x00"), "description"),
        (
            "IngestText",
            ingest_pb2.IngestTextRequest(corpus_id="1", text="t", source_url="https://x/\x00"),
            "source_url",
        ),
        ("IngestText", ingest_pb2.IngestTextRequest(corpus_id="1", text="a\x00b"), "text"),
        ("IngestText", ingest_pb2.IngestTextRequest(corpus_id="1", text="t", title="\x00"), "title"),
        (
            "MoveDocuments",
            ingest_pb2.MoveDocumentsRequest(target_corpus_id="1", document_ids=["1", "2\x00"]),
            "document_ids[1]",
        ),
        ("GetDocument", ingest_pb2.GetDocumentRequest(document_id="1\x00"), "document_id"),
    ],
)
async def test_a_nul_in_any_text_field_is_invalid_argument_naming_it(stub, make_token, call, request_, field):
    """PostgreSQL cannot store 0x00; the caller is told which field holds one."""
    metadata = auth(make_token("tenant-nul"))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await getattr(stub, call)(request_, metadata=metadata)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(caught.value).reason == "NUL_CHARACTER"
    assert error_info(caught.value).metadata["field"] == field


async def test_a_nul_in_an_uploads_filename_is_invalid_argument(stub, make_token):
    async def messages():
        yield ingest_pb2.UploadDocumentRequest(corpus_id="1", filename="a\x00.txt")

    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.UploadDocument(messages(), metadata=auth(make_token("tenant-nul-upload")))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(caught.value).metadata["field"] == "filename"


@pytest.mark.parametrize(
    "body",
    [
        b'--B\r\nContent-Disposition: form-data; name="file"\rfilename="x.txt"\r\n\r\nabc\r\n--B--\r\n',  # bare CR
        b'--B\r\nContent-Disposition: form-data; name="file"; filename="x.txt"\n\r\nabc\r\n--B--\r\n',  # bare LF
        b"--B\r\n\x00\r\n\r\nabc\r\n--B--\r\n",
        b"--C\r\nnot the boundary\r\n",
    ],
)
async def test_a_malformed_multipart_body_is_invalid_argument(stub, make_token, body):
    """the parser's refusal is the caller's error, not an internal one."""
    metadata = auth(make_token("tenant-multipart"))
    corpus = await stub.CreateCorpus(ingest_pb2.CreateCorpusRequest(name=f"m{hash(body)}"), metadata=metadata)

    async def messages():
        yield ingest_pb2.UploadDocumentRequest(
            corpus_id=corpus.corpus_id,
            http_body=httpbody_pb2.HttpBody(content_type="multipart/form-data; boundary=B", data=body),
        )

    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.UploadDocument(messages(), metadata=metadata)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
    listed = await stub.ListDocuments(ingest_pb2.ListDocumentsRequest(corpus_id=corpus.corpus_id), metadata=metadata)
    assert not listed.documents


@pytest.mark.parametrize(
    "spelling", ["²", "١", "１", "0{id}", "+{id}", " {id}", "{id} ", "-1", "0", "9223372036854775808", "{id}\n"]
)
async def test_an_id_has_one_spelling_through_the_real_service(stub, make_token, spelling):
    """Other spellings of a corpus id name nothing (404), never a 500 or that corpus."""
    metadata = auth(make_token("tenant-ids"))
    name = f"ids-{abs(hash(spelling))}"
    corpus = await stub.CreateCorpus(ingest_pb2.CreateCorpusRequest(name=name), metadata=metadata)
    await stub.ListDocuments(ingest_pb2.ListDocumentsRequest(corpus_id=corpus.corpus_id), metadata=metadata)
    for call, request in (
        (stub.ListDocuments, ingest_pb2.ListDocumentsRequest(corpus_id=spelling.format(id=corpus.corpus_id))),
        (stub.GetDocument, ingest_pb2.GetDocumentRequest(document_id=spelling.format(id=corpus.corpus_id))),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call(request, metadata=metadata)
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND


async def test_a_method_nobody_serves_is_unimplemented_with_an_error_info(ingest_server, make_token):
    """As the gateway answers a path the API lacks: METHOD_NOT_FOUND, after the token for ours."""
    async with grpc.aio.insecure_channel(ingest_server) as channel:
        for path, token in (
            ("/foo.Bar/Baz", None),  # not ours: no token asked
            ("/knowledge.v1.SearchService/Search", make_token("tenant-a")),  # another process's
            ("/knowledge.v1.CorpusService/NoSuchMethod", make_token("tenant-a")),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await channel.unary_unary(path)(b"", metadata=auth(token) if token else None)
            assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED, path
            assert error_info(caught.value).reason == "METHOD_NOT_FOUND", path
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await channel.unary_unary("/knowledge.v1.CorpusService/NoSuchMethod")(b"")
        assert error_info(caught.value).reason == "TOKEN_MISSING"
