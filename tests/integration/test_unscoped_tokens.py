"""Every RPC of every public gRPC service refuses a token whose scope does not resolve: the three
public processes built by their real bootstraps (content-index and the embedder are never
called: the refusal comes first), each method found in the generated descriptors and called with
an empty request. A new RPC is walked too, so it cannot forget the refusal; the exemptions are
listed here, each with its reason."""

from __future__ import annotations

import uuid

import grpc
import pytest
from google.protobuf import message_factory
from knowledge.v1 import documents_ai_pb2, ingest_pb2, search_pb2
from knowledge_documents_ai.bootstrap import build_app as documents_ai_app
from knowledge_documents_ai.config import DocumentsAiSettings
from knowledge_gateway.descriptors import public_service_names
from knowledge_ingest.bootstrap import build_app as ingest_app
from knowledge_ingest.config import IngestSettings
from knowledge_runtime.auth import ADMIN_CAPABILITIES, PUBLIC_CAPABILITIES
from knowledge_runtime.settings import Env
from knowledge_runtime.system_corpora import SYSTEM_WRITE
from knowledge_search.bootstrap import build_app as search_app
from knowledge_search.config import SearchSettings

from tests.support.net import free_port
from tests.support.real_services import base_env
from tests.support.rpc import auth, error_info

pytestmark = pytest.mark.integration

# Served to an unscoped token: platform administration names the tenant it manages in the request
# and reads or writes nothing of a tenant's corpora, so the operator's token needs no scope.
EXEMPT = {
    "knowledge.v1.TenantService/GetTenantSettings",
    "knowledge.v1.TenantService/UpdateTenantSettings",
}
# Every capability a user's token may hold: a refusal here is the scope's, never a missing capability.
EVERYTHING = [*PUBLIC_CAPABILITIES, *ADMIN_CAPABILITIES, SYSTEM_WRITE]


@pytest.fixture(scope="module")
async def addresses(migrated_pg, keys_dir, tmp_path_factory):
    """ingest, search and documents-ai as their processes build themselves; their backends are a
    port nothing listens on."""
    tmp = tmp_path_factory.mktemp("unscoped")
    nowhere = f"127.0.0.1:{free_port()}"
    apps = [
        await ingest_app(
            IngestSettings.from_env(
                Env(
                    {
                        **base_env(migrated_pg, keys_dir, tmp, "ingest"),
                        "KNOWLEDGE_INGEST_PORT": "0",
                        "KNOWLEDGE_INGEST_WORKERS": "0",
                        "KNOWLEDGE_CONTENT_INDEX_ADDRESS": nowhere,
                        "KNOWLEDGE_EMBEDDER_ADDRESS": nowhere,
                    }
                )
            )
        ),
        await search_app(
            SearchSettings.from_env(
                Env(
                    {
                        **base_env(migrated_pg, keys_dir, tmp, "search"),
                        "KNOWLEDGE_SEARCH_PORT": "0",
                        "KNOWLEDGE_EMBEDDER_ADDRESS": nowhere,
                    }
                )
            )
        ),
        await documents_ai_app(
            DocumentsAiSettings.from_env(
                Env(
                    {
                        **base_env(migrated_pg, keys_dir, tmp, "documents-ai"),
                        "KNOWLEDGE_DOCUMENTS_AI_PORT": "0",
                        "KNOWLEDGE_EMBEDDER_ADDRESS": nowhere,
                    }
                )
            )
        ),
    ]
    try:
        ingest, search, docai = [f"127.0.0.1:{await app.start()}" for app in apps]
        yield {
            **{service.full_name: ingest for service in ingest_pb2.DESCRIPTOR.services_by_name.values()},
            **{service.full_name: search for service in search_pb2.DESCRIPTOR.services_by_name.values()},
            **{service.full_name: docai for service in documents_ai_pb2.DESCRIPTOR.services_by_name.values()},
        }
    finally:
        for app in reversed(apps):
            await app.stop()


def methods():
    for file in (ingest_pb2, search_pb2, documents_ai_pb2):
        for service in file.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                yield f"{service.full_name}/{method.name}", method


def test_the_walk_covers_every_public_service():
    walked = {name.partition("/")[0] for name, _ in methods()}
    assert walked == set(public_service_names())
    assert EXEMPT <= {name for name, _ in methods()}


async def call(address: str, method, metadata) -> None:
    """The method called with an empty request (one, for a client stream), its answer read through."""
    request_type = message_factory.GetMessageClass(method.input_type)
    response_type = message_factory.GetMessageClass(method.output_type)
    path = f"/{method.containing_service.full_name}/{method.name}"
    kwargs = {"request_serializer": request_type.SerializeToString, "response_deserializer": response_type.FromString}

    async def one():
        yield request_type()

    async with grpc.aio.insecure_channel(address) as channel:
        if method.client_streaming and method.server_streaming:
            async for _ in channel.stream_stream(path, **kwargs)(one(), metadata=metadata, timeout=10):
                pass
        elif method.client_streaming:
            await channel.stream_unary(path, **kwargs)(one(), metadata=metadata, timeout=10)
        elif method.server_streaming:
            async for _ in channel.unary_stream(path, **kwargs)(request_type(), metadata=metadata, timeout=10):
                pass
        else:
            await channel.unary_unary(path, **kwargs)(request_type(), metadata=metadata, timeout=10)


@pytest.mark.parametrize("claim", [None, "workspace:nowhere", "project:no-path"])
@pytest.mark.parametrize(("name", "method"), list(methods()), ids=[name for name, _ in methods()])
async def test_every_rpc_refuses_a_token_whose_scope_does_not_resolve(addresses, make_token, name, method, claim):
    token = make_token(f"unscoped-{uuid.uuid4().hex[:6]}", EVERYTHING, scope=claim)
    try:
        await call(addresses[method.containing_service.full_name], method, auth(token))
    except grpc.aio.AioRpcError as error:
        reason = error_info(error).reason
        if name in EXEMPT:
            assert reason != "SCOPE_UNRESOLVED"
            return
        assert (error.code(), reason) == (grpc.StatusCode.PERMISSION_DENIED, "SCOPE_UNRESOLVED"), error.details()
        return
    assert name in EXEMPT, f"{name} answered a token whose scope does not resolve"
