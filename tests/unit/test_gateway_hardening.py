"""The gateway's hardening through the real Envoy with the rendered configuration, in front of a
gRPC server that records what reaches it (every public RPC, answered with an empty message):
tokens from the Authorization header only, an access log without query values and with the
client's method, unknown JSON fields refused before they are dropped by the transcoder, header sizes refused the same way every time as a JSON 431, rate-limited gRPC
callers answered RESOURCE_EXHAUSTED, and slow clients cut off while others are served."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator

import grpc
import pytest
from knowledge.v1 import search_pb2, search_pb2_grpc
from knowledge_gateway.config import MAX_REQUEST_HEADERS_KB
from knowledge_runtime.server import MAX_METADATA_BYTES, GrpcApp, ServiceSpec

from tests.support.envoy import SERVICES, Recorder, running_gateway

API = "/api/v1/knowledge"


@pytest.fixture
async def gateway(tmp_path, keys_dir) -> AsyncIterator[dict]:
    async with running_gateway(tmp_path, keys_dir) as running:
        yield running


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def access_log(gateway: dict, count: int) -> list[dict]:
    """The access log's lines once it has ``count`` of them (Envoy flushes it every second)."""
    deadline = time.monotonic() + 10
    while True:
        lines = [json.loads(line) for line in gateway["log"].read_text().splitlines() if line.startswith("{")]
        requests = [line for line in lines if line["path"] != "/livez"]
        if len(requests) >= count or time.monotonic() > deadline:
            return requests
        await asyncio.sleep(0.2)


# -- item 2: credentials from the Authorization header only, and never logged ------------------------
async def test_a_token_in_the_query_string_is_not_accepted(gateway, make_token):
    client, token = gateway["client"], make_token("acme")
    for name in ("access_token", "token"):
        reply = await client.get(f"{API}/corpora", params={name: token})
        assert reply.status_code == 401, reply.text
        assert reply.json()["details"][0]["reason"] == "TOKEN_MISSING"
    assert gateway["recorder"].calls == []  # nothing reached a service
    assert (await client.get(f"{API}/corpora", headers=bearer(token))).status_code == 200


async def test_the_access_log_has_no_query_values_and_the_clients_method(gateway, make_token):
    client, token = gateway["client"], make_token("acme")
    secret_name = "salary-review-of-jane-doe.pdf"
    await client.get(f"{API}/corpora", params={"access_token": token, "key": "k-123456"})
    await client.post(
        f"{API}/upload", params={"corpus_id": "1", "filename": secret_name}, content=b"x", headers=bearer(token)
    )
    await client.get(f"{API}/corpora", params={"page_size": "5"}, headers=bearer(token))
    await client.get(f"{API}/nothing-here", params={"token": token}, headers=bearer(token))
    lines = await access_log(gateway, 4)
    text = gateway["log"].read_text()
    assert token not in text and token.split(".")[1] not in text and "k-123456" not in text
    assert secret_name not in text and "salary" not in text
    by_path = {(line["method"], line["path"]): line for line in lines}
    assert by_path[("GET", f"{API}/corpora")]["query"] in {"access_token,key", "page_size"}
    upload = by_path[("POST", f"{API}/upload")]
    assert upload["query"] == "corpus_id,filename" and upload["grpc_method"].endswith("/UploadDocument")
    listed = [line for line in lines if line["grpc_method"] == "/knowledge.v1.CorpusService/ListCorpora"]
    assert listed and all(line["method"] == "GET" for line in listed)  # not the upstream gRPC POST
    assert by_path[("GET", f"{API}/nothing-here")]["status"] == 404


async def test_a_client_sent_original_method_or_path_is_not_logged(gateway, make_token):
    await gateway["client"].get(
        f"{API}/corpora",
        headers={**bearer(make_token("acme")), "x-envoy-original-method": "FAKE", "x-envoy-original-path": "/fake?x=1"},
    )
    [line] = await access_log(gateway, 1)
    assert (line["method"], line["path"]) == ("GET", f"{API}/corpora")
    _, metadata, _ = gateway["recorder"].calls[-1]
    assert metadata["x-envoy-original-path"] == f"{API}/corpora"


# -- item 3: unknown JSON fields ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/search", {"query": "x", "corpus": "9"}, "corpus"),  # a misspelt corpus_id
        ("/corpora", {"name": "x", "admin": True}, "admin"),
        ("/search", {"query": "x", "weights": {"vector": 1, "bogus": 2}}, "weights.bogus"),
        ("/documents:move", {"target_corpus_id": "1", "document_ids": ["1"], "all": True}, "all"),
        ("/ingest/0b1c:cancel", {"force": 1}, "force"),
        ("/texts", {"corpus_id": "1", "text": "t", "extra": {"nested": [1, {"a": None}]}}, "extra"),
    ],
)
async def test_an_unknown_json_field_is_400_naming_it_and_reaches_no_service(gateway, make_token, path, body, field):
    reply = await gateway["client"].post(f"{API}{path}", json=body, headers=bearer(make_token("acme")))
    assert reply.status_code == 400, reply.text
    assert reply.json()["details"][0]["reason"] == "UNKNOWN_FIELD"  # as a service names one
    assert reply.json()["details"][0]["metadata"] == {"field": field}
    assert reply.json()["message"] == f"unknown field {field} in the request body"
    assert gateway["recorder"].calls == []


async def test_known_fields_in_either_spelling_and_large_bodies_pass(gateway, make_token):
    client, headers = gateway["client"], bearer(make_token("acme"))
    cases = [
        (
            "/search",
            {
                "query": 'a "quoted" \\ {x}',
                "topK": 3,
                "weights": {"vector": 1, "lexical": 0.5},
                "mode": "SEARCH_MODE_HYBRID",
            },
        ),
        ("/corpora", {"name": "n", "description": "d"}),
        ("/documents:move", {"target_corpus_id": "1", "document_ids": ["1", "2"]}),
        ("/texts", {"corpus_id": "1", "text": "word " * 600_000, "title": "t"}),  # 3 MB, over Envoy's 1 MiB buffer
    ]
    for path, body in cases:
        reply = await client.post(f"{API}{path}", json=body, headers=headers)
        assert reply.status_code == 200, (path, reply.text)
    names = [name for name, _, _ in gateway["recorder"].calls]
    assert names == ["Search", "CreateCorpus", "MoveDocuments", "IngestText"]
    search = gateway["recorder"].calls[0][2][0]
    assert search.top_k == 3 and search.weights.lexical == 0.5
    assert len(gateway["recorder"].calls[3][2][0].text) == 3_000_000


async def test_a_null_field_is_400_and_malformed_json_stays_400(gateway, make_token):
    client, headers = gateway["client"], bearer(make_token("acme"))
    null = await client.post(f"{API}/query", json={"query": "x", "document_id": None}, headers=headers)
    assert null.status_code == 400 and "document_id" in null.json()["message"]
    assert null.json()["details"][0] | {"@type": ""} == {
        "@type": "",
        "reason": "INVALID_REQUEST",
        "domain": "knowledge.v1",
        "metadata": {"field": "document_id"},
    }
    for body in (b"{not json", b'{"query": "x",', b"[" * 5000):
        reply = await client.post(
            f"{API}/search", content=body, headers={**headers, "content-type": "application/json"}
        )
        assert reply.status_code == 400, (body[:20], reply.text)
        assert reply.json()["details"][0]["reason"] == "INVALID_REQUEST"
    assert gateway["recorder"].calls == []


# -- item 5: header sizes, refused the same way every time -------------------------------------------
async def test_a_long_filename_or_a_huge_token_is_a_json_431_every_time(gateway, make_token):
    client = gateway["client"]
    long_name = await client.post(
        f"{API}/upload",
        params={"corpus_id": "1", "filename": "a" * 10_000},
        content=b"x",
        headers=bearer(make_token("acme")),
    )
    huge = make_token("acme", subject="n" * 10_000)  # a 10,000-character claim
    huge_token = await client.get(f"{API}/corpora", headers=bearer(huge))
    for reply in (long_name, huge_token):
        assert reply.status_code == 431, reply.text
        assert reply.headers["content-type"] == "application/json" and "retry-after" not in reply.headers
        body = reply.json()
        assert body["code"] == 3 and body["details"][0]["reason"] == "HEADERS_TOO_LARGE"
        assert "header" in body["message"] and "x-envoy" not in body["message"] and "vs." not in body["message"]
    assert gateway["recorder"].calls == []


async def test_header_sizes_around_the_limit_always_get_the_same_answer(gateway, make_token):
    """Each size, sent five times, gets one status; every size the gateway takes reaches the service."""
    token = make_token("acme")
    limit = MAX_REQUEST_HEADERS_KB * 1024
    answers: dict[int, set[int]] = {}
    for size in range(limit - 2048, limit + 2048, 256):
        padding = "p" * (size - len(token))
        for _ in range(5):
            reply = await gateway["client"].get(f"{API}/corpora", headers={**bearer(token), "x-padding": padding})
            answers.setdefault(size, set()).add(reply.status_code)
    assert all(len(statuses) == 1 for statuses in answers.values()), str(sorted(answers.items()))
    assert {next(iter(s)) for s in answers.values()} == {200, 431}
    taken = sum(5 for statuses in answers.values() if statuses == {200})
    assert len(gateway["recorder"].calls) == taken
    # What Envoy forwards for the largest request it takes fits the services' metadata limit.
    largest = max(len(k) + len(v) + 32 for _, metadata, _ in gateway["recorder"].calls for k, v in metadata.items())
    assert sum(len(k) + len(v) + 32 for k, v in gateway["recorder"].calls[-1][1].items()) < MAX_METADATA_BYTES
    assert largest < MAX_METADATA_BYTES


async def test_the_services_take_metadata_up_to_one_limit_every_time(verifier, make_token):
    """A service's gRPC server (GrpcApp) has one metadata bound: under it every call passes (with
    gRPC's defaults, 8 KiB to 16 KiB passed at random and more never did), over it none does."""
    recorder = Recorder()
    search = next(service for service in SERVICES if service.name == "SearchService")
    spec = ServiceSpec(
        descriptor=search,
        register=lambda server: server.add_generic_rpc_handlers(
            [
                grpc.method_handlers_generic_handler(
                    search.full_name, {m.name: recorder.handler(m) for m in search.methods}
                )
            ]
        ),
        capabilities={m.name: "search" for m in search.methods},
    )
    app = GrpcApp(services=[spec], verifier=verifier)
    port = await app.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = search_pb2_grpc.SearchServiceStub(channel)

            token = make_token("acme")

            async def outcomes(size: int) -> set:
                seen = set()
                for _ in range(10):
                    metadata = [("authorization", f"Bearer {token}"), ("x-padding", "p" * size)]
                    try:
                        await stub.Search(search_pb2.SearchRequest(query="x"), metadata=metadata)
                        seen.add("ok")
                    except grpc.aio.AioRpcError as error:
                        seen.add(error.code())
                return seen

            for size in (12 * 1024, 20 * 1024, MAX_METADATA_BYTES - 4096):
                assert await outcomes(size) == {"ok"}, size
            assert "ok" not in await outcomes(MAX_METADATA_BYTES + 1024)
    finally:
        await app.stop()


# -- item 6: rate-limited gRPC callers -----------------------------------------------------------------
async def test_a_rate_limited_grpc_caller_gets_resource_exhausted_with_retry_after(tmp_path, keys_dir, make_token):
    async with running_gateway(tmp_path, keys_dir, rate_limit_rps=1, rate_limit_burst=2) as gateway:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gateway['port']}") as channel:
            stub = search_pb2_grpc.SearchServiceStub(channel)
            metadata = [("authorization", f"Bearer {make_token('grpc-caller')}")]
            errors = []
            for _ in range(6):
                try:
                    await stub.Search(search_pb2.SearchRequest(query="x"), metadata=metadata)
                except grpc.aio.AioRpcError as error:
                    errors.append(error)
        assert errors, "never rate limited"
        assert {error.code() for error in errors} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
        trailing = dict(errors[0].trailing_metadata())
        assert trailing["retry-after"] == "1"
        assert "rate" in errors[0].details() and not errors[0].details().startswith("{")


# -- item 7: slow clients --------------------------------------------------------------------------
def _trickle(port: int, data: bytes, seconds: float) -> tuple[float, bytes]:
    """Sends ``data`` a byte a second (at most ``seconds`` long); returns when the gateway closed
    the connection (or the time ran out) and what it answered."""
    start = time.monotonic()
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(1.0)
    answer = b""
    try:
        for byte in data:
            if time.monotonic() - start > seconds:
                break
            try:
                sock.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                break
            try:
                more = sock.recv(65536)
                if not more:
                    break
                answer += more
            except TimeoutError:
                continue
            except ConnectionResetError:
                break
    finally:
        sock.close()
    return time.monotonic() - start, answer


async def test_a_slow_client_is_cut_off_while_others_are_served(tmp_path, keys_dir, make_token):
    async with running_gateway(tmp_path, keys_dir, request_headers_timeout_s=2, request_body_timeout_s=4) as gateway:
        port, token = gateway["port"], make_token("acme")
        slow_headers = (
            f"GET {API}/corpora HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
            + "X-Slow: "
            + "s" * 100
            + "\r\n\r\n"
        ).encode()
        slow_body = (
            f"POST {API}/corpora HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
            "Content-Type: application/json\r\nContent-Length: 200\r\n\r\n"
        ).encode() + b" " * 200
        trickles = [asyncio.to_thread(_trickle, port, data, 30) for data in (slow_headers, slow_body)]

        async def others() -> list[tuple[int, float]]:
            served = []
            for _ in range(20):
                start = time.monotonic()
                reply = await gateway["client"].get(f"{API}/corpora", headers=bearer(token))
                served.append((reply.status_code, time.monotonic() - start))
                await asyncio.sleep(0.1)
            return served

        (headers_cut, _), (body_cut, body_answer), served = await asyncio.gather(*trickles, others())
        assert headers_cut < 6, f"a client sending its headers a byte a second kept its connection {headers_cut:.1f} s"
        assert body_cut < 8, f"a client sending its body a byte a second kept its connection {body_cut:.1f} s"
        assert b" 408 " in body_answer.split(b"\r\n", 1)[0], body_answer[:200]
        assert all(status == 200 and seconds < 2 for status, seconds in served), served


# -- item 15: an undeclared method is 405 -------------------------------------------------------------
async def test_query_and_other_undeclared_methods_are_405_with_allow(gateway, make_token):
    headers = bearer(make_token("acme"))
    for method, path, allow in [
        ("QUERY", "/documents/0", "DELETE, GET, PATCH"),
        ("QUERY", "/corpora?page_size=1", "GET, POST"),
        ("PUT", "/corpora", "GET, POST"),
        ("PATCH", "/search", "POST"),
    ]:
        reply = await gateway["client"].request(method, f"{API}{path}", headers=headers)
        assert reply.status_code == 405, (method, path, reply.text)
        assert reply.headers["allow"] == allow
        assert reply.json()["details"][0]["reason"] == "METHOD_NOT_ALLOWED"
    assert gateway["recorder"].calls == []
