"""What the gateway answers itself, against the real Envoy with the rendered configuration in front
of a gRPC server that records what reaches it: one request id end to end, and each of its own
refusals with the reason, code and metadata a service gives for the same failure, over REST and
to a gRPC caller (in grpc-status-details-bin, as from a service)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest
from knowledge.v1 import ingest_pb2, ingest_pb2_grpc, search_pb2, search_pb2_grpc
from knowledge_runtime.devkeys import ensure_dev_keys, mint_dev_token
from knowledge_runtime.reasons import REASONS
from knowledge_runtime.server import GrpcApp, ServiceSpec

from tests.support.envoy import SERVICES, Recorder, running_gateway
from tests.support.rpc import error_info

API = "/api/v1/knowledge"
SEARCH = next(service for service in SERVICES if service.name == "SearchService")


@pytest.fixture
async def gateway(tmp_path, keys_dir) -> AsyncIterator[dict]:
    async with running_gateway(tmp_path, keys_dir) as running:
        yield running


@pytest.fixture
async def service(verifier) -> AsyncIterator[str]:
    """A service as the runtime serves one (its interceptors, its token checks): the direct path."""
    recorder = Recorder()
    spec = ServiceSpec(
        descriptor=SEARCH,
        register=lambda server: server.add_generic_rpc_handlers(
            [
                grpc.method_handlers_generic_handler(
                    SEARCH.full_name, {m.name: recorder.handler(m) for m in SEARCH.methods}
                )
            ]
        ),
        capabilities={m.name: "search" for m in SEARCH.methods},
    )
    app = GrpcApp(services=[spec], verifier=verifier)
    port = await app.start()
    yield f"127.0.0.1:{port}"
    await app.stop()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def grpc_failure(address: str, path: str, token: str | None) -> tuple[str, str, dict]:
    """(code, reason, metadata) of a gRPC call that fails, from its grpc-status-details-bin."""
    async with grpc.aio.insecure_channel(address) as channel:
        call = channel.unary_unary(path, request_serializer=search_pb2.SearchRequest.SerializeToString)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call(
                search_pb2.SearchRequest(query="x"), metadata=[("authorization", f"Bearer {token}")] if token else None
            )
    info = error_info(caught.value)
    return caught.value.code().name, info.reason, dict(info.metadata)


def tokens(keys_dir, tmp_path) -> dict[str, str | None]:
    return {
        "missing": None,
        "garbage": "not.a.jwt",
        "expired": mint_dev_token(keys_dir, tenant="acme", ttl_s=-120),  # past the 30 s clock skew
        "wrong-audience": mint_dev_token(keys_dir, tenant="acme", audience="another-api"),  # jwt_authn's 403
        "wrong-issuer": mint_dev_token(keys_dir, tenant="acme", issuer="someone-else"),
        "other-key": mint_dev_token(ensure_dev_keys(tmp_path / "other").parent, tenant="acme"),
    }


EXPECTED = {
    "missing": "TOKEN_MISSING",
    "garbage": "TOKEN_INVALID",
    "expired": "TOKEN_EXPIRED",
    "wrong-audience": "TOKEN_INVALID",
    "wrong-issuer": "TOKEN_INVALID",
    "other-key": "TOKEN_INVALID",
}


async def test_a_refused_token_reads_the_same_from_a_service_over_rest_and_over_grpc(
    gateway, service, keys_dir, tmp_path
):
    through = f"127.0.0.1:{gateway['port']}"
    for case, token in tokens(keys_dir, tmp_path).items():
        reason = EXPECTED[case]
        direct = await grpc_failure(service, "/knowledge.v1.SearchService/Search", token)
        via_gateway = await grpc_failure(through, "/knowledge.v1.SearchService/Search", token)
        assert direct == via_gateway == ("UNAUTHENTICATED", reason, {}), case
        rest = await gateway["client"].post(
            f"{API}/search", json={"query": "x"}, headers=bearer(token) if token else {}
        )
        assert rest.status_code == 401 and rest.headers["www-authenticate"].startswith("Bearer"), case
        body = rest.json()
        assert (body["code"], body["details"][0]["reason"], body["details"][0].get("metadata", {})) == (16, reason, {})
    assert gateway["recorder"].calls == []  # none reached a service


async def test_a_method_the_api_lacks_reads_the_same_on_every_path(gateway, service, make_token):
    token = make_token("acme")
    through = f"127.0.0.1:{gateway['port']}"
    # Paths no route sends to a service: the gateway answers them itself (an unknown method of a
    # routed service is the service's answer, which the e2e table test compares).
    for path in ("/knowledge.v1.NoSuchService/Search", "/foo.Bar/Baz"):
        direct = await grpc_failure(service, path, token)
        assert direct == await grpc_failure(through, path, token) == ("UNIMPLEMENTED", "METHOD_NOT_FOUND", {}), path
    rest = await gateway["client"].get(f"{API}/nothing-here", headers=bearer(token))
    assert rest.status_code == 404 and rest.json()["details"][0]["reason"] == "METHOD_NOT_FOUND"
    assert rest.json()["code"] == 12 and REASONS["METHOD_NOT_FOUND"].http_status == 404


async def test_the_rate_limit_reads_the_same_over_rest_and_over_grpc(tmp_path, keys_dir, make_token):
    async with running_gateway(tmp_path, keys_dir, rate_limit_rps=1, rate_limit_burst=2) as gateway:
        limited = []
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gateway['port']}") as channel:
            stub = search_pb2_grpc.SearchServiceStub(channel)
            for _ in range(6):
                try:
                    await stub.Search(
                        search_pb2.SearchRequest(query="x"), metadata=[("authorization", f"Bearer {make_token('g')}")]
                    )
                except grpc.aio.AioRpcError as error:
                    limited.append(error)
        assert limited and {e.code() for e in limited} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
        info = error_info(limited[0])
        assert (info.reason, dict(info.metadata)) == ("RATE_LIMITED", {})
        assert dict(limited[0].trailing_metadata())["retry-after"] == "1"
        rest = [await gateway["client"].get(f"{API}/corpora", headers=bearer(make_token("r"))) for _ in range(6)]
        refused = [r for r in rest if r.status_code == 429]
        assert refused and refused[0].json()["details"][0]["reason"] == "RATE_LIMITED"
        assert refused[0].json()["code"] == 8


async def test_the_request_id_is_the_client_s_or_the_gateway_s_and_comes_back(gateway, make_token):
    client, recorder = gateway["client"], gateway["recorder"]
    sent = await client.get(f"{API}/corpora", headers={**bearer(make_token("acme")), "x-request-id": "client-id-1"})
    assert sent.status_code == 200 and sent.headers["x-request-id"] == "client-id-1"
    made = await client.get(f"{API}/corpora", headers=bearer(make_token("acme")))
    assert made.status_code == 200 and made.headers["x-request-id"] not in {"", "client-id-1"}
    refused = await client.get(f"{API}/corpora", headers={"x-request-id": "client-id-2"})  # the gateway's own answer
    assert refused.status_code == 401 and refused.headers["x-request-id"] == "client-id-2"
    forwarded = [metadata.get("x-request-id") for name, metadata, _ in recorder.calls if name == "ListCorpora"]
    assert forwarded == ["client-id-1", made.headers["x-request-id"]]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gateway['port']}") as channel:
        call = ingest_pb2_grpc.CorpusServiceStub(channel).ListCorpora(
            ingest_pb2.ListCorporaRequest(),
            metadata=[("authorization", f"Bearer {make_token('acme')}"), ("x-request-id", "grpc-id-1")],
        )
        await call
        assert dict(await call.initial_metadata())["x-request-id"] == "grpc-id-1"
    assert recorder.calls[-1][1]["x-request-id"] == "grpc-id-1"
