"""The runtime's service kit with real parts: a callee's gRPC error as the caller's domain error
(through a real server, its error map and both clients that use the translation), and
bootstraps that close what they opened when a later step fails (real pool, real channels)."""

from __future__ import annotations

import asyncio
import logging
import socket
import urllib.request

import grpc
import pytest
import structlog
from knowledge.v1 import embedder_pb2, embedder_pb2_grpc, search_pb2, search_pb2_grpc
from knowledge_cli.stack_settings import default_embedding_model
from knowledge_embedder.domain.errors import AnchorNotFound, EmbedderStopping, InvalidInput, QueueFull
from knowledge_ingest.clients.services import EmbedderClient
from knowledge_ingest.domain.errors import DependencyNotReady
from knowledge_runtime.db.pool import Database
from knowledge_runtime.devkeys import KEY_ID_FILE, PRIVATE_KEY_FILE
from knowledge_runtime.errors import (
    DependencyUnavailable,
    DomainError,
    InvalidArgument,
    NotFound,
    Unavailable,
    UploadTooLarge,
)
from knowledge_runtime.refusals import Refusal, Refused
from knowledge_runtime.registry import service as registered
from knowledge_runtime.server import GrpcApp, ServiceSpec
from knowledge_runtime.service_tokens import ServiceTokenSigner
from knowledge_runtime.settings import CommonSettings, Env, SettingsError
from knowledge_search.adapters.embedder import GrpcQueryEmbedder
from knowledge_search.adapters.postgres import PostgresChunkIndex
from knowledge_search.api.servicer import SearchServicer, service_spec
from knowledge_search.domain.answer import ExtractiveSynthesiser
from knowledge_search.usecases import AnswerUseCases, SearchUseCases

from tests.support.net import free_port
from tests.support.rpc import auth, error_info

pytestmark = pytest.mark.integration

SECRET = "password=hunter2 at /srv/secret/path"
REFUSALS: dict[str, Exception] = {
    "cap": UploadTooLarge(1000),
    "busy": QueueFull(10, 8),
    "stopping": EmbedderStopping(),
    "bad": InvalidInput("the query is empty", field="query"),
    "gone": AnchorNotFound("document_type", "7"),
    "crash": RuntimeError(SECRET),
}


class RefusingEmbedder(embedder_pb2_grpc.EmbedderServiceServicer):
    """Refuses every call with the error its input names, through the real error map."""

    async def EmbedQuery(self, request, context):
        raise REFUSALS[request.query]

    async def EmbedTexts(self, request, context):
        raise REFUSALS[request.texts[0]]

    async def Rerank(self, request, context):
        raise REFUSALS[request.query]


@pytest.fixture(scope="module")
async def refusing_embedder(verifier):
    descriptor = embedder_pb2.DESCRIPTOR.services_by_name["EmbedderService"]
    servicer = RefusingEmbedder()
    app = GrpcApp(
        services=[
            ServiceSpec(
                descriptor=descriptor,
                register=lambda server: embedder_pb2_grpc.add_EmbedderServiceServicer_to_server(servicer, server),
                capabilities={m.name: "embed" for m in descriptor.methods},
                unscoped=[m.name for m in descriptor.methods],  # internal, as the real embedder's
            )
        ],
        verifier=verifier,
    )
    port = await app.start()
    yield f"127.0.0.1:{port}"
    await app.stop()


def ingest_signer(keys_dir) -> ServiceTokenSigner:
    common = CommonSettings.from_env(
        "ingest",
        Env(
            {
                "KNOWLEDGE_SERVICE_KEY_PATH": str(keys_dir / PRIVATE_KEY_FILE),
                "KNOWLEDGE_SERVICE_KEY_ID": (keys_dir / KEY_ID_FILE).read_text().strip(),
            }
        ),
    )
    return ServiceTokenSigner.for_service(common)


async def refusal(client, what: str) -> DomainError:
    """What the client raises for the callee's refusal ``what``: search's and ingest's clients."""
    with pytest.raises(DomainError) as caught:
        if isinstance(client, GrpcQueryEmbedder):
            await client.embed_query("kit-tenant", what)
        else:
            await client.embed("kit-tenant", [what])
    return caught.value


@pytest.fixture(params=["search", "ingest"])
async def client(request, refusing_embedder, keys_dir, make_service_token):
    if request.param == "search":
        embedder = GrpcQueryEmbedder(refusing_embedder, token_for=lambda tenant: make_service_token(tenant, ["embed"]))
    else:
        embedder = EmbedderClient(refusing_embedder, ingest_signer(keys_dir))
    yield embedder
    await embedder.close()


@pytest.mark.parametrize(
    ("what", "kind", "code", "reason", "metadata"),
    [
        ("cap", UploadTooLarge, "RESOURCE_EXHAUSTED", "UPLOAD_TOO_LARGE", {"max_bytes": "1000"}),
        ("busy", DependencyUnavailable, "RESOURCE_EXHAUSTED", "EMBEDDER_OVERLOADED", {"waiting": "10", "limit": "8"}),
        ("stopping", DependencyUnavailable, "UNAVAILABLE", "EMBEDDER_STOPPING", {}),
        ("bad", InvalidArgument, "INVALID_ARGUMENT", "INVALID_REQUEST", {"field": "query"}),
        ("gone", NotFound, "NOT_FOUND", "ANCHOR_NOT_FOUND", {"entity_type": "document_type", "entity_id": "7"}),
        ("crash", DomainError, "INTERNAL", "INTERNAL", {}),
    ],
)
async def test_a_callee_error_keeps_its_code_and_reason_through_either_client(
    client, what, kind, code, reason, metadata
):
    error = await refusal(client, what)
    if what == "stopping" and isinstance(error, DependencyNotReady):
        # ingest's client: a callee that is stopping is restarting under the job, which spends no attempt
        kind, reason, metadata = DependencyNotReady, "DEPENDENCY_NOT_READY", {"service": "embedder"}
    assert type(error) is kind or (kind is DomainError and not isinstance(error, Unavailable))
    assert (error.code, error.reason, error.metadata) == (code, reason, metadata)
    # Only what may pass is retryable: ingest's pipeline retries Unavailable, and nothing else.
    assert isinstance(error, Unavailable) == (what in ("busy", "stopping"))
    assert SECRET not in error.message
    if what == "bad":
        assert error.message == "the query is empty"


@pytest.mark.parametrize(
    ("what", "kind", "reason"),
    [("busy", DependencyUnavailable, "EMBEDDER_OVERLOADED"), ("crash", DomainError, "INTERNAL")],
)
async def test_a_failed_rerank_is_the_callees_error(refusing_embedder, make_service_token, what, kind, reason):
    """Search's Rerank call keeps the callee's cause too (it raised NameError for anything but
    'not configured' until the lint found the undefined name)."""
    embedder = GrpcQueryEmbedder(refusing_embedder, token_for=lambda tenant: make_service_token(tenant, ["embed"]))
    try:
        with pytest.raises(DomainError) as caught:
            await embedder.rerank("kit-tenant", what, ["a passage"])
    finally:
        await embedder.close()
    assert isinstance(caught.value, kind) and caught.value.reason == reason
    assert SECRET not in caught.value.message


async def test_a_missing_capability_is_the_callees_refusal(refusing_embedder, make_service_token):
    embedder = GrpcQueryEmbedder(refusing_embedder, token_for=lambda tenant: make_service_token(tenant, ["search"]))
    try:
        error = await refusal(embedder, "cap")
    finally:
        await embedder.close()
    assert isinstance(error, Refused) and error.refusal is Refusal.CAPABILITY_MISSING
    assert (error.code, error.reason, error.metadata) == (
        "PERMISSION_DENIED",
        "CAPABILITY_MISSING",
        {"capability": "embed"},
    )


async def test_an_unreachable_callee_is_unavailable_without_its_address(keys_dir):
    port = free_port()  # nothing listens there
    for embedder in (
        GrpcQueryEmbedder(f"127.0.0.1:{port}", timeout_s=5),
        EmbedderClient(f"127.0.0.1:{port}", ingest_signer(keys_dir), timeout_s=5),
    ):
        try:
            error = await refusal(embedder, "anything")
        finally:
            await embedder.close()
        # Search cannot answer without it: the closed set's RUNTIME_UNAVAILABLE; ingest retries it.
        kind, reason = (
            (Refused, "RUNTIME_UNAVAILABLE")
            if isinstance(embedder, GrpcQueryEmbedder)
            else (
                DependencyUnavailable,
                "EMBEDDER_UNAVAILABLE",
            )
        )
        assert isinstance(error, kind) and isinstance(error, DependencyUnavailable) != (kind is Refused)
        assert (error.code, error.reason, error.message) == ("UNAVAILABLE", reason, "the embedder is unavailable")
        assert str(port) not in repr(error.metadata)


async def test_the_callers_caller_sees_the_callees_reason(
    refusing_embedder, migrated_pg, verifier, make_token, make_service_token
):
    """Search over real PostgreSQL with the refusing embedder: its answer carries the embedder's cause."""
    db = await Database.connect(migrated_pg.url(user="knowledge_search"))
    embedder = GrpcQueryEmbedder(refusing_embedder, token_for=lambda tenant: make_service_token(tenant, ["embed"]))
    searches = SearchUseCases(PostgresChunkIndex(db), embedder)
    app = GrpcApp(
        services=[service_spec(SearchServicer(searches, AnswerUseCases(searches, ExtractiveSynthesiser())))],
        verifier=verifier,
    )
    port = await app.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = search_pb2_grpc.SearchServiceStub(channel)
            for query, code, reason in (
                ("busy", grpc.StatusCode.RESOURCE_EXHAUSTED, "EMBEDDER_OVERLOADED"),
                ("bad", grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST"),
                ("stopping", grpc.StatusCode.UNAVAILABLE, "EMBEDDER_STOPPING"),
            ):
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await stub.Search(search_pb2.SearchRequest(query=query), metadata=auth(make_token("kit-tenant")))
                assert (caught.value.code(), error_info(caught.value).reason) == (code, reason)
    finally:
        await app.stop()
        await embedder.close()
        await db.close()


# --- bootstraps -------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def logging_restored():
    """A bootstrap configures logging (at warning here): the tests after these get theirs back."""
    saved, level = structlog.get_config(), logging.getLogger().level
    yield
    structlog.configure(**saved)
    logging.getLogger().setLevel(level)


def service_env(pg, keys_dir, tmp_path, service: str, metrics_port: int) -> Env:
    entry = registered(service)
    return Env(
        {
            "KNOWLEDGE_DATA_DIR": str(tmp_path),
            "KNOWLEDGE_DATABASE_URL": pg.url(user=entry.database_role),
            "KNOWLEDGE_JWKS_PATH": str(keys_dir / "jwks.json"),
            "KNOWLEDGE_SERVICE_KEY_PATH": str(keys_dir / PRIVATE_KEY_FILE),
            "KNOWLEDGE_BLOB_ROOT": str(tmp_path / "blobs"),
            "KNOWLEDGE_LOG_LEVEL": "warning",
            f"KNOWLEDGE_{entry.port_setting}": "0",
            "KNOWLEDGE_INGEST_WORKERS": "1",
            "KNOWLEDGE_METRICS_PORT": str(metrics_port),
            "KNOWLEDGE_CONTENT_INDEX_ADDRESS": f"127.0.0.1:{free_port()}",
            "KNOWLEDGE_EMBEDDER_ADDRESS": f"127.0.0.1:{free_port()}",
            "KNOWLEDGE_EMBEDDING_MODEL": default_embedding_model(),
        }
    )


def build(service: str, env: Env):
    if service == "embedder":
        from knowledge_embedder.bootstrap import build_app
        from knowledge_embedder.config import EmbedderSettings

        return build_app(EmbedderSettings.from_env(env))
    if service == "content-index":
        from knowledge_content_index.bootstrap import build_app
        from knowledge_content_index.config import ContentIndexSettings

        return build_app(ContentIndexSettings.from_env(env))
    if service == "ingest":
        from knowledge_ingest.bootstrap import build_app
        from knowledge_ingest.config import IngestSettings

        return build_app(IngestSettings.from_env(env))
    from knowledge_search.bootstrap import build_app
    from knowledge_search.config import SearchSettings

    return build_app(SearchSettings.from_env(env))


@pytest.fixture
def opened(monkeypatch):
    """Every pool and channel a bootstrap opens, through the real functions."""
    import knowledge_content_index.bootstrap
    import knowledge_embedder.bootstrap
    import knowledge_ingest.bootstrap
    import knowledge_ingest.clients.services
    import knowledge_search.adapters.embedder
    import knowledge_search.bootstrap
    from knowledge_runtime import clients
    from knowledge_runtime.db.connect import connect_service_database

    seen: dict[str, list] = {"pools": [], "channels": []}

    async def connect(*args, **kwargs):
        db = await connect_service_database(*args, **kwargs)
        seen["pools"].append(db.pool)
        return db

    def channel(*args, **kwargs):
        opened_channel = clients.channel(*args, **kwargs)
        seen["channels"].append(opened_channel)
        return opened_channel

    for module in (
        knowledge_content_index.bootstrap,
        knowledge_embedder.bootstrap,
        knowledge_ingest.bootstrap,
        knowledge_search.bootstrap,
    ):
        monkeypatch.setattr(module, "connect_service_database", connect)
    for module in (knowledge_ingest.clients.services, knowledge_search.adapters.embedder):
        monkeypatch.setattr(module, "channel", channel)
    return seen


CHANNELS = {"content-index": 0, "embedder": 0, "ingest": 3, "search": 1}


def scrape(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=10) as reply:
        return reply.status, reply.read()


@pytest.mark.parametrize("service", ["content-index", "embedder", "ingest", "search"])
async def test_a_bootstrap_that_fails_late_closes_what_it_opened(service, opened, migrated_pg, keys_dir, tmp_path):
    with socket.socket() as taken:  # the metrics port, one of the last steps, is in use
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        env = service_env(migrated_pg, keys_dir, tmp_path, service, taken.getsockname()[1])
        with pytest.raises(SettingsError, match="KNOWLEDGE_METRICS_PORT"):
            await build(service, env)
    assert len(opened["pools"]) == 1 and len(opened["channels"]) == CHANNELS[service]
    assert opened["pools"][0].is_closing()
    assert all(c.get_state() == grpc.ChannelConnectivity.SHUTDOWN for c in opened["channels"])


@pytest.mark.parametrize("service", ["content-index", "ingest", "search"])
async def test_every_service_serves_metrics_and_closes_everything_when_it_stops(
    service, opened, migrated_pg, keys_dir, tmp_path
):
    metrics_port = free_port()
    app = await build(service, service_env(migrated_pg, keys_dir, tmp_path, service, metrics_port))
    await app.start()
    try:
        status, body = await asyncio.to_thread(scrape, f"http://127.0.0.1:{metrics_port}/metrics")
        assert status == 200 and b"# TYPE" in body
        assert not opened["pools"][0].is_closing()
    finally:
        await app.stop()
    assert opened["pools"][0].is_closing()
    assert all(c.get_state() == grpc.ChannelConnectivity.SHUTDOWN for c in opened["channels"])
    with socket.socket() as again:  # the metrics server let go of its port (TIME_WAIT aside)
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", metrics_port))
        again.listen()
