"""A call's deadline, cancellation and request id reach the services it calls: the real search
service in front of an embedder served by the real runtime (its interceptors, its logs) whose
EmbedQuery takes far longer than any caller waits, recording what it was given and when it ended."""

from __future__ import annotations

import asyncio
import json
import time

import asyncpg
import grpc
import pytest
from knowledge.v1 import embedder_pb2, embedder_pb2_grpc, search_pb2, search_pb2_grpc
from knowledge_runtime.calls import DEADLINE_MARGIN_S
from knowledge_runtime.db.pool import Database
from knowledge_runtime.logging import configure_logging
from knowledge_runtime.server import GrpcApp, ServiceSpec
from knowledge_search.adapters.embedder import GrpcQueryEmbedder
from knowledge_search.adapters.postgres import PostgresChunkIndex
from knowledge_search.api.servicer import SearchServicer, service_spec
from knowledge_search.domain.answer import ExtractiveSynthesiser
from knowledge_search.domain.relevance import Thresholds
from knowledge_search.usecases import AnswerUseCases, SearchUseCases

pytestmark = pytest.mark.integration

TENANT = "deadlines"
EMBEDDER = embedder_pb2.DESCRIPTOR.services_by_name["EmbedderService"]


class SlowEmbedder(embedder_pb2_grpc.EmbedderServiceServicer):
    """EmbedQuery that would answer after a minute: what it was given, and when its call ended."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    async def EmbedQuery(self, request, context):
        seen = {
            "started": time.monotonic(),
            "time_remaining": context.time_remaining(),
            "request_id": dict(context.invocation_metadata()).get("x-request-id"),
        }
        self.calls.append(seen)
        try:
            await asyncio.sleep(60)
        finally:
            seen["ended"] = time.monotonic()
        return embedder_pb2.EmbedQueryResponse()


@pytest.fixture(scope="module")
async def stack(migrated_pg, verifier, make_service_token):
    admin = await asyncpg.connect(migrated_pg.url())
    try:
        await admin.execute("INSERT INTO tenants (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING", TENANT)
        await admin.execute("INSERT INTO corpora (tenant_id, name) VALUES ($1, 'handbook')", TENANT)
    finally:
        await admin.close()
    slow = SlowEmbedder()
    embedder_app = GrpcApp(
        services=[
            ServiceSpec(
                descriptor=EMBEDDER,
                register=lambda server: embedder_pb2_grpc.add_EmbedderServiceServicer_to_server(slow, server),
                capabilities={m.name: "embed" for m in EMBEDDER.methods},
                unscoped=[m.name for m in EMBEDDER.methods],
            )
        ],
        verifier=verifier,
    )
    embedder_port = await embedder_app.start()
    db = await Database.connect(migrated_pg.url(user="knowledge_search"))
    embedder = GrpcQueryEmbedder(
        f"127.0.0.1:{embedder_port}", token_for=lambda tenant: make_service_token(tenant, ["embed"])
    )
    searches = SearchUseCases(PostgresChunkIndex(db), embedder, Thresholds(high_top=0.6, high_mean=0.3))
    answers = AnswerUseCases(searches, ExtractiveSynthesiser())
    app = GrpcApp(services=[service_spec(SearchServicer(searches, answers))], verifier=verifier)
    port = await app.start()
    yield {"address": f"127.0.0.1:{port}", "embedder": slow}
    await app.stop()
    await embedder.close()
    await embedder_app.stop()
    await db.close()


@pytest.fixture
async def stub(stack):
    async with grpc.aio.insecure_channel(stack["address"]) as channel:
        yield search_pb2_grpc.SearchServiceStub(channel)


def vector_search(query: str) -> search_pb2.SearchRequest:
    return search_pb2.SearchRequest(query=query, mode=search_pb2.SEARCH_MODE_VECTOR)


async def test_the_embedder_call_gets_the_caller_s_deadline_and_ends_with_it(stack, stub, make_token, capsys):
    configure_logging("search", "info")
    metadata = [("authorization", f"Bearer {make_token(TENANT)}"), ("x-request-id", "req-deadline-1")]
    started = time.monotonic()
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.Search(vector_search("vacation"), metadata=metadata, timeout=0.5)
    ended = time.monotonic()
    await asyncio.sleep(0.2)  # the embedder's side of the call settles
    [call] = [c for c in stack["embedder"].calls if c["request_id"] == "req-deadline-1"]
    # The embedder was told the caller's deadline, less the margin, not "no deadline"...
    assert call["time_remaining"] is not None and 0.2 < call["time_remaining"] <= 0.5 - DEADLINE_MARGIN_S
    # ...and its call ended with its caller's, not a minute later.
    assert abs(call["ended"] - ended) < 0.15 and call["ended"] - started < 0.7, (call, started, ended)
    # The caller learns either that its deadline passed or, in the margin, that the embedder did not answer.
    assert caught.value.code() in {grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE}
    # The embedder logged the caller's request id, not one of its own.
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    embedder_lines = [line for line in lines if line.get("rpc") == "/knowledge.v1.EmbedderService/EmbedQuery"]
    assert embedder_lines and {line["request_id"] for line in embedder_lines} == {"req-deadline-1"}


async def test_the_embedder_call_is_cancelled_when_its_caller_goes(stack, stub, make_token):
    metadata = [("authorization", f"Bearer {make_token(TENANT)}"), ("x-request-id", "req-cancel-1")]
    call = stub.Search(vector_search("holidays"), metadata=metadata)  # no deadline at all
    for _ in range(100):
        if any(c["request_id"] == "req-cancel-1" for c in stack["embedder"].calls):
            break
        await asyncio.sleep(0.02)
    call.cancel()
    cancelled = time.monotonic()
    await asyncio.sleep(0.3)
    [seen] = [c for c in stack["embedder"].calls if c["request_id"] == "req-cancel-1"]
    assert seen["time_remaining"] > 20  # the client's own timeout: no deadline was made up
    assert "ended" in seen and seen["ended"] - cancelled < 0.2


async def test_every_answer_echoes_the_request_id(stack, stub, make_token):
    """In the trailing metadata, the caller's id or the one made up for the call, errors included."""
    metadata = [("authorization", f"Bearer {make_token(TENANT)}"), ("x-request-id", "req-echo-1")]
    call = stub.Search(search_pb2.SearchRequest(query="", mode=search_pb2.SEARCH_MODE_LEXICAL), metadata=metadata)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    trailers = dict(caught.value.trailing_metadata())
    assert trailers["x-request-id"] == "req-echo-1" and "grpc-status-details-bin" in trailers
    ok = stub.Search(
        search_pb2.SearchRequest(query="anything", mode=search_pb2.SEARCH_MODE_LEXICAL),
        metadata=metadata[:1],
    )
    await ok
    made_up = dict(await ok.trailing_metadata())["x-request-id"]
    assert len(made_up) == 32 and made_up != "req-echo-1"


class _Served:
    """The ServicerContext of a call being served, as ``calls`` reads it: 5 s left, not done."""

    def time_remaining(self) -> float:
        return 5.0

    def done(self) -> bool:
        return False


async def test_calls_of_every_shape_carry_the_request_id_and_the_deadline():
    """grpc.aio files a client interceptor under the first call shape it implements: a streamed call
    (WriteBlob, ReadBlob) must be intercepted as a unary one is."""
    from knowledge_runtime import calls, clients

    seen: list[tuple[str, str | None, float | None]] = []

    def record(shape: str, context) -> None:
        seen.append((shape, dict(context.invocation_metadata()).get("x-request-id"), context.time_remaining()))

    async def unary_unary(request, context):
        record("unary_unary", context)
        return b""

    async def unary_stream(request, context):
        record("unary_stream", context)
        yield b""

    async def stream_unary(requests, context):
        record("stream_unary", context)
        async for _ in requests:
            pass
        return b""

    async def stream_stream(requests, context):
        record("stream_stream", context)
        async for _ in requests:
            yield b""

    server = grpc.aio.server()
    handlers = {
        "UU": grpc.unary_unary_rpc_method_handler(unary_unary),
        "US": grpc.unary_stream_rpc_method_handler(unary_stream),
        "SU": grpc.stream_unary_rpc_method_handler(stream_unary),
        "SS": grpc.stream_stream_rpc_method_handler(stream_stream),
    }
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("test.Shapes", handlers)])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = clients.channel(f"127.0.0.1:{port}")

    async def one():
        yield b"x"

    try:
        with calls.serving("req-shapes-1", _Served()):  # type: ignore[arg-type]
            await channel.unary_unary("/test.Shapes/UU")(b"")
            _ = [r async for r in channel.unary_stream("/test.Shapes/US")(b"")]
            await channel.stream_unary("/test.Shapes/SU")(one())
            _ = [r async for r in channel.stream_stream("/test.Shapes/SS")(one())]
    finally:
        await channel.close()
        await server.stop(None)
    assert [shape for shape, _, _ in seen] == ["unary_unary", "unary_stream", "stream_unary", "stream_stream"]
    for shape, request_id, remaining in seen:
        assert request_id == "req-shapes-1", shape
        # The caller's 5 s less the margin, as gRPC sends it: its timeout header may round a value
        # close to one sent before up (HPACK), never past the caller's own deadline.
        assert remaining is not None and 4.5 < remaining <= 5.0, (shape, seen)
