"""The same failure reads the same on every path: gRPC to the service, gRPC through the gateway,
and REST through the gateway give the same reason, the same metadata and the catalogue's code
(the HTTP status over REST), whether a service answers or the gateway itself (a token, a path the
API lacks, a body over the cap, the rate limit)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import grpc
import httpx
import pytest
from google.api import httpbody_pb2
from google.protobuf.message import Message
from google.rpc import code_pb2
from knowledge.v1 import ingest_pb2, search_pb2
from knowledge_runtime.reasons import REASONS

from tests.support.contracts import CAP, RATE_BURST
from tests.support.rpc import error_info

pytestmark = pytest.mark.e2e

SEARCH = "/knowledge.v1.SearchService/Search"
LIST_CORPORA = "/knowledge.v1.CorpusService/ListCorpora"
CREATE_CORPUS = "/knowledge.v1.CorpusService/CreateCorpus"
UPLOAD = "/knowledge.v1.IngestJobService/UploadDocument"
SET_DEFAULT_ACCESS = "/knowledge.v1.CorpusService/SetCorpusDefaultAccess"


@dataclass(frozen=True)
class Caller:
    base: str  # the REST base URL
    token: Callable[..., str]  # (tenant, capabilities=None, **claims) -> a token

    def corpus(self, tenant: str) -> str:
        """A corpus of ``tenant``'s, made once."""
        if tenant not in _corpora:
            reply = httpx.post(f"{self.base}/corpora", json={"name": "Contracts"}, headers=bearer(self.token(tenant)))
            assert reply.status_code == 200, reply.text
            _corpora[tenant] = reply.json()["corpus_id"]
        return _corpora[tenant]


_corpora: dict[str, str] = {}


@dataclass(frozen=True)
class Case:
    reason: str
    service: str  # the process a direct gRPC call goes to ("search", "ingest"); "" for none
    grpc: Callable[[str, Caller], Awaitable[grpc.aio.AioRpcError]]
    rest: Callable[[Caller], httpx.Response] | None
    same_metadata: bool = True  # False where the paths name the same thing differently (a JSON key, a field number)


def bearer(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


async def unary_error(address: str, path: str, request: Message, token: str | None) -> grpc.aio.AioRpcError:
    metadata = [("authorization", f"Bearer {token}")] if token else None
    async with grpc.aio.insecure_channel(address) as channel:
        call = channel.unary_unary(path, request_serializer=type(request).SerializeToString)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call(request, metadata=metadata, timeout=30)
    return caught.value


TokenOf = Callable[[Caller], str | None]


def search(token_of: TokenOf, **fields) -> Callable:
    async def call(address: str, caller: Caller) -> grpc.aio.AioRpcError:
        return await unary_error(address, SEARCH, search_pb2.SearchRequest(**fields), token_of(caller))

    return call


def rest_search(token_of: TokenOf, body: dict) -> Callable:
    def call(caller: Caller) -> httpx.Response:
        return httpx.post(f"{caller.base}/search", json=body, headers=bearer(token_of(caller)), timeout=30)

    return call


def rest_get(path: str, token_of: TokenOf) -> Callable:
    def call(caller: Caller) -> httpx.Response:
        return httpx.get(f"{caller.base}{path}", headers=bearer(token_of(caller)), timeout=30)

    return call


def user(tenant: str, **kwargs) -> TokenOf:
    return lambda caller: caller.token(tenant, **kwargs)


def no_token(_caller: Caller) -> None:
    return None


def garbage(_caller: Caller) -> str:
    return "not.a.jwt"


def with_unknown_field(message: Message, number: int = 111) -> Message:
    """``message`` as a client built from a newer or misspelt proto sends it (a varint field)."""
    tag, encoded = number << 3, b""
    while tag >= 0x80:
        encoded, tag = encoded + bytes([tag & 0x7F | 0x80]), tag >> 7
    return type(message).FromString(message.SerializeToString() + encoded + bytes([tag, 1]))


async def upload_over_the_cap(address: str, caller: Caller) -> grpc.aio.AioRpcError:
    corpus = caller.corpus("contracts-upload")
    piece = b"\0" * (256 * 1024)

    async def requests():
        first = ingest_pb2.UploadDocumentRequest(corpus_id=corpus, filename="big.bin")
        first.http_body.CopyFrom(httpbody_pb2.HttpBody(content_type="application/octet-stream", data=piece))
        yield first
        for _ in range(CAP // len(piece) + 1):
            yield ingest_pb2.UploadDocumentRequest(http_body=httpbody_pb2.HttpBody(data=piece))

    async with grpc.aio.insecure_channel(address) as channel:
        call = channel.stream_unary(UPLOAD, request_serializer=ingest_pb2.UploadDocumentRequest.SerializeToString)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call(requests(), metadata=bearer_metadata(caller.token("contracts-upload")), timeout=60)
    return caught.value


def bearer_metadata(token: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}")]


def rest_upload_over_the_cap(caller: Caller) -> httpx.Response:
    return httpx.post(
        f"{caller.base}/upload",
        params={"corpus_id": caller.corpus("contracts-upload"), "filename": "big.bin"},
        content=b"\0" * (CAP + 1),
        headers={**bearer(caller.token("contracts-upload")), "Content-Type": "application/octet-stream"},
        timeout=60,
    )


CASES = {
    "token missing": Case(
        "TOKEN_MISSING", "search", search(no_token, query="x"), rest_search(no_token, {"query": "x"})
    ),
    "token expired": Case(
        "TOKEN_EXPIRED",
        "search",
        search(user("c-expired", ttl_s=-120), query="x"),
        rest_search(user("c-expired", ttl_s=-120), {"query": "x"}),
    ),
    "token invalid": Case("TOKEN_INVALID", "search", search(garbage, query="x"), rest_search(garbage, {"query": "x"})),
    "token for another audience": Case(
        "TOKEN_INVALID",
        "search",
        search(user("c-aud", audience="another-api"), query="x"),
        rest_search(user("c-aud", audience="another-api"), {"query": "x"}),
    ),
    "capability missing": Case(
        "CAPABILITY_MISSING",
        "search",
        search(user("c-cap", capabilities=["corpus.read"]), query="x"),
        rest_search(user("c-cap", capabilities=["corpus.read"]), {"query": "x"}),
    ),
    "scope unresolved": Case(
        "SCOPE_UNRESOLVED",
        "search",
        search(user("c-scope", scope=None), query="x"),
        rest_search(user("c-scope", scope=None), {"query": "x"}),
    ),
    "empty query": Case(
        "INVALID_REQUEST", "search", search(user("c-invalid"), query=""), rest_search(user("c-invalid"), {"query": ""})
    ),
    "NUL in the query": Case(
        "NUL_CHARACTER",
        "search",
        search(user("c-nul"), query="a\x00b"),
        rest_search(user("c-nul"), {"query": "a\x00b"}),
    ),
    "unknown field": Case(
        "UNKNOWN_FIELD",
        "search",
        lambda address, caller: unary_error(
            address, SEARCH, with_unknown_field(search_pb2.SearchRequest(query="x")), caller.token("c-field")
        ),
        rest_search(user("c-field"), {"query": "x", "bogus": 1}),
        same_metadata=False,
    ),
    "unknown document": Case(
        "DOCUMENT_NOT_FOUND",
        "search",
        search(user("c-doc"), query="x", document_id="999999"),
        rest_search(user("c-doc"), {"query": "x", "document_id": "999999"}),
    ),
    "unknown corpus": Case(
        "CORPUS_NOT_FOUND",
        "search",
        search(user("c-corpus"), query="x", corpus_id="999999"),
        rest_search(user("c-corpus"), {"query": "x", "corpus_id": "999999"}),
    ),
    "page token not issued": Case(
        "PAGE_TOKEN_INVALID",
        "ingest",
        lambda address, caller: unary_error(
            address, LIST_CORPORA, ingest_pb2.ListCorporaRequest(page_token="garbage"), caller.token("c-page")
        ),
        rest_get("/corpora?page_token=garbage", user("c-page")),
    ),
    "no such method": Case(
        "METHOD_NOT_FOUND",
        "search",
        lambda address, caller: unary_error(
            address, "/knowledge.v1.SearchService/NoSuchMethod", search_pb2.SearchRequest(), caller.token("c-method")
        ),
        rest_get("/nothing-here", user("c-method")),
    ),
    "no such service": Case(
        "METHOD_NOT_FOUND",
        "search",
        lambda address, caller: unary_error(
            address, "/knowledge.v1.NoSuchService/Search", search_pb2.SearchRequest(), caller.token("c-method")
        ),
        None,
    ),
    "access list invalid": Case(
        "ACCESS_LIST_INVALID",
        "ingest",
        lambda address, caller: unary_error(
            address,
            SET_DEFAULT_ACCESS,
            ingest_pb2.SetCorpusDefaultAccessRequest(
                corpus_id=caller.corpus("c-access"), default_principals=["user:ana", "hr"]
            ),
            caller.token("c-access"),
        ),
        lambda caller: httpx.post(
            f"{caller.base}/corpora/{caller.corpus('c-access')}:setDefaultAccess",
            json={"default_principals": ["user:ana", "hr"]},
            headers=bearer(caller.token("c-access")),
            timeout=30,
        ),
    ),
    "upload over the cap": Case("UPLOAD_TOO_LARGE", "ingest", upload_over_the_cap, rest_upload_over_the_cap),
}


def grpc_outcome(error: grpc.aio.AioRpcError) -> tuple[str, str, dict[str, str]]:
    info = error_info(error)
    assert info.domain == "knowledge.v1"
    return error.code().name, info.reason, dict(info.metadata)


@pytest.mark.parametrize("name", list(CASES))
async def test_the_same_failure_on_the_three_paths(stack, token, name):
    case, caller = CASES[name], Caller(stack["base"], token)
    spec = REASONS[case.reason]
    outcomes = {}
    if case.service:
        outcomes["direct"] = grpc_outcome(await case.grpc(stack["grpc"][case.service], caller))
    outcomes["gateway"] = grpc_outcome(await case.grpc(stack["grpc"]["gateway"], caller))
    code, reason, metadata = outcomes["gateway"]
    assert (code, reason) == (spec.code, case.reason), outcomes
    if case.same_metadata:
        assert len({repr(outcome) for outcome in outcomes.values()}) == 1, outcomes
    else:
        assert len({(c, r, tuple(sorted(m))) for c, r, m in outcomes.values()}) == 1, outcomes
    assert set(metadata) <= set(spec.metadata)
    if case.rest is None:
        return
    reply = case.rest(caller)
    assert reply.headers["content-type"] == "application/json", reply.text
    body = reply.json()
    [detail] = body["details"]
    assert (reply.status_code, body["code"], detail["reason"]) == (
        spec.http_status,
        code_pb2.Code.Value(spec.code),
        case.reason,
    ), body
    rest_metadata = detail.get("metadata", {})
    assert rest_metadata == metadata if case.same_metadata else set(rest_metadata) == set(metadata), (body, outcomes)


async def test_the_rate_limit_reads_the_same_over_rest_and_grpc(stack, token):
    """The gateway's own, so two paths: RESOURCE_EXHAUSTED over gRPC, 429 over REST, RATE_LIMITED."""
    grpc_token, rest_token = token("c-noisy-grpc"), token("c-noisy-rest")
    async with grpc.aio.insecure_channel(stack["grpc"]["gateway"]) as channel:
        call = channel.unary_unary(LIST_CORPORA, request_serializer=ingest_pb2.ListCorporaRequest.SerializeToString)

        async def one() -> grpc.aio.AioRpcError | None:
            try:
                await call(ingest_pb2.ListCorporaRequest(), metadata=[("authorization", f"Bearer {grpc_token}")])
            except grpc.aio.AioRpcError as error:
                return error
            return None

        errors = [e for e in await asyncio.gather(*(one() for _ in range(3 * RATE_BURST))) if e is not None]
    assert errors, "never rate limited"
    assert {(code, reason, tuple(metadata)) for code, reason, metadata in map(grpc_outcome, errors)} == {
        ("RESOURCE_EXHAUSTED", "RATE_LIMITED", ())
    }
    assert dict(errors[0].trailing_metadata())["retry-after"] == "1"
    async with httpx.AsyncClient(timeout=30) as client:
        replies = await asyncio.gather(
            *(
                client.get(f"{stack['base']}/corpora", headers={"Authorization": f"Bearer {rest_token}"})
                for _ in range(3 * RATE_BURST)
            )
        )
    limited = [r for r in replies if r.status_code == 429]
    assert limited, [r.status_code for r in replies]
    body = limited[0].json()
    assert (body["code"], body["details"][0]["reason"]) == (code_pb2.RESOURCE_EXHAUSTED, "RATE_LIMITED")
    assert REASONS["RATE_LIMITED"].http_status == 429
