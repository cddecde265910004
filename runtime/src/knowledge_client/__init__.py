"""A client of the knowledge service's public gRPC API for the platform's Python services.

The generated ``knowledge.v1`` stubs and typed messages (``*_pb2.pyi``), one ``grpc.aio`` channel
with the bearer token set on every call by an interceptor, unary RPCs that raise
:class:`KnowledgeError` (the catalogue's reason and metadata, decoded from
``grpc-status-details-bin``), and helpers for the upload stream and the watches::

    async with KnowledgeClient("127.0.0.1:8080", token=token) as kc:
        corpus = await kc.corpora.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="Handbook"))
        await kc.upload(corpus.corpus_id, "handbook.pdf", Path("handbook.pdf").read_bytes())
        async for change in kc.watch_documents(corpus.corpus_id):
            if change.document.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE:
                break
        reply = await kc.search.Search(search_pb2.SearchRequest(query="vacation", corpus_id=corpus.corpus_id))

The same contract as the TypeScript package (clients/typescript); docs/api.md says what each
call answers and every reason's meaning.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any

import grpc
from google.api import httpbody_pb2
from google.rpc import error_details_pb2, status_pb2
from knowledge.v1 import (
    common_pb2,
    documents_ai_pb2,
    documents_ai_pb2_grpc,
    ingest_pb2,
    ingest_pb2_grpc,
    search_pb2,
    search_pb2_grpc,
)

__all__ = [
    "REASONS",
    "KnowledgeClient",
    "KnowledgeError",
    "TokenSource",
    "error_info",
    "raising",
    "token_interceptors",
]

ERROR_DOMAIN = "knowledge.v1"
# Every reason of the catalogue (knowledge.v1.ErrorReason without its prefix): "CORPUS_NOT_FOUND"...
REASONS = frozenset(v.name.removeprefix("ERROR_REASON_") for v in common_pb2.ErrorReason.DESCRIPTOR.values) - {
    "UNSPECIFIED"
}
CHUNK_BYTES = 256 * 1024
TokenSource = str | Callable[[], str]


def error_info(error: grpc.aio.AioRpcError) -> error_details_pb2.ErrorInfo | None:
    """The ErrorInfo of our domain in a failed call's ``grpc-status-details-bin``, if any."""
    raw = dict(error.trailing_metadata() or ()).get("grpc-status-details-bin")
    if not isinstance(raw, bytes):
        return None
    for detail in status_pb2.Status.FromString(raw).details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info) and info.domain == ERROR_DOMAIN:
            return info
    return None


class KnowledgeError(Exception):
    """A call the service (or the gateway) refused or failed: its code, the catalogue's reason
    ("UNKNOWN" when the status carried none: the channel's own failure), metadata, request id."""

    def __init__(self, error: grpc.aio.AioRpcError) -> None:
        info = error_info(error)
        super().__init__(error.details() or error.code().name)
        self.code: grpc.StatusCode = error.code()
        self.reason: str = info.reason if info is not None else "UNKNOWN"
        self.metadata: dict[str, str] = dict(info.metadata) if info is not None else {}
        request_id = dict(error.trailing_metadata() or ()).get("x-request-id")
        self.request_id: str | None = request_id if isinstance(request_id, str) else None

    @property
    def known(self) -> bool:
        """Whether this client's catalogue has the reason (a newer service may send a newer one)."""
        return self.reason in REASONS


def _with_token(details: grpc.aio.ClientCallDetails, token: TokenSource) -> grpc.aio.ClientCallDetails:
    value = token() if callable(token) else token
    metadata = [(k, v) for k, v in (details.metadata or ()) if k != "authorization"]
    metadata.append(("authorization", f"Bearer {value}"))
    return grpc.aio.ClientCallDetails(
        details.method, details.timeout, grpc.aio.Metadata(*metadata), details.credentials, details.wait_for_ready
    )


class _Token:
    """``authorization: Bearer <token>`` on every call of the channel (a callable is asked each
    time); one subclass per call shape, since grpc.aio files an interceptor under its first only."""

    def __init__(self, token: TokenSource) -> None:
        self.token = token


class _UnaryUnaryToken(_Token, grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(self, continuation, client_call_details, request):
        return await continuation(_with_token(client_call_details, self.token), request)


class _UnaryStreamToken(_Token, grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(self, continuation, client_call_details, request):
        return await continuation(_with_token(client_call_details, self.token), request)


class _StreamUnaryToken(_Token, grpc.aio.StreamUnaryClientInterceptor):
    async def intercept_stream_unary(self, continuation, client_call_details, request_iterator):
        return await continuation(_with_token(client_call_details, self.token), request_iterator)


class _StreamStreamToken(_Token, grpc.aio.StreamStreamClientInterceptor):
    async def intercept_stream_stream(self, continuation, client_call_details, request_iterator):
        return await continuation(_with_token(client_call_details, self.token), request_iterator)


def token_interceptors(token: TokenSource) -> list[grpc.aio.ClientInterceptor]:
    """The interceptors that set the token on every call of a channel, whatever its shape."""
    return [_UnaryUnaryToken(token), _UnaryStreamToken(token), _StreamUnaryToken(token), _StreamStreamToken(token)]


class _Service:
    """A generated stub whose unary RPCs raise KnowledgeError; its streams are the stub's own."""

    def __init__(self, stub: Any, descriptor: Any) -> None:
        self._stub = stub
        self._unary = {m.name for m in descriptor.methods if not (m.client_streaming or m.server_streaming)}

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._stub, name)
        if name not in self._unary:
            return method

        async def call(request: Any, **options: Any) -> Any:
            try:
                return await method(request, **options)
            except grpc.aio.AioRpcError as error:
                raise KnowledgeError(error) from None

        return call


def raising(stub: Any, descriptor: Any) -> Any:
    """Any generated stub (an internal service's too) whose unary RPCs raise KnowledgeError."""
    return _Service(stub, descriptor)


class KnowledgeClient:
    """The public services over one channel: the gateway's address, or a service's own port.

    ``channel=`` wraps a channel the caller made instead (one whose interceptors already set the
    token, as a service forwarding its caller's does); closing the client closes it."""

    def __init__(
        self,
        address: str | None = None,
        *,
        token: TokenSource | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        channel: grpc.aio.Channel | None = None,
    ) -> None:
        if channel is not None:
            if address is not None or token is not None or credentials is not None:
                raise ValueError("give either channel= or an address and a token, not both")
            self.channel = channel
        elif address is None or token is None:
            raise ValueError("an address and a token are required without channel=")
        else:
            interceptors = token_interceptors(token)
            self.channel = (
                grpc.aio.secure_channel(address, credentials, interceptors=interceptors)
                if credentials is not None
                else grpc.aio.insecure_channel(address, interceptors=interceptors)
            )
        ingest, search, documents_ai = ingest_pb2_grpc, search_pb2_grpc, documents_ai_pb2_grpc
        services = ingest_pb2.DESCRIPTOR.services_by_name
        self.corpora = _Service(ingest.CorpusServiceStub(self.channel), services["CorpusService"])
        self.documents = _Service(ingest.DocumentServiceStub(self.channel), services["DocumentService"])
        self.jobs = _Service(ingest.IngestJobServiceStub(self.channel), services["IngestJobService"])
        self.imports = _Service(ingest.ImportServiceStub(self.channel), services["ImportService"])
        self.tenants = _Service(ingest.TenantServiceStub(self.channel), services["TenantService"])
        self.events = _Service(ingest.EventServiceStub(self.channel), services["EventService"])
        self.passages = _Service(ingest.PassageServiceStub(self.channel), services["PassageService"])
        self.webhooks = _Service(ingest.WebhookServiceStub(self.channel), services["WebhookService"])
        self.search = _Service(
            search.SearchServiceStub(self.channel), search_pb2.DESCRIPTOR.services_by_name["SearchService"]
        )
        self.documents_ai = _Service(
            documents_ai.DocumentsAIServiceStub(self.channel),
            documents_ai_pb2.DESCRIPTOR.services_by_name["DocumentsAIService"],
        )

    async def upload(
        self,
        corpus_id: str,
        filename: str,
        data: bytes | Iterable[bytes] | AsyncIterable[bytes],
        *,
        content_type: str = "application/octet-stream",
        metadata: Mapping[str, Any] | None = None,
        principals: Sequence[str] | None = None,
        timeout: float | None = None,
    ) -> ingest_pb2.UploadDocumentResponse:
        """Streams a file into a corpus; answered once its bytes are stored, with its job. The
        corpus, the file's name, its metadata and its access list go on the first message, as
        UploadDocument asks. ``principals``: who may read the new document (``user:<sub>``,
        ``group:<name>``; empty: everyone who reaches the corpus); None: the corpus's default."""

        def first_message(body: httpbody_pb2.HttpBody) -> ingest_pb2.UploadDocumentRequest:
            message = ingest_pb2.UploadDocumentRequest(corpus_id=corpus_id, filename=filename, http_body=body)
            if metadata:
                message.metadata.update(dict(metadata))
            if principals is not None:  # an empty list is a list: set, it overrides the default
                message.access.SetInParent()
                message.access.principals.extend(principals)
            return message

        async def requests() -> AsyncIterator[ingest_pb2.UploadDocumentRequest]:
            first = True
            async for piece in _pieces(data):
                if first:
                    yield first_message(httpbody_pb2.HttpBody(data=piece, content_type=content_type))
                else:
                    yield ingest_pb2.UploadDocumentRequest(http_body=httpbody_pb2.HttpBody(data=piece))
                first = False
            if first:
                yield first_message(httpbody_pb2.HttpBody(content_type=content_type))

        try:
            return await self.jobs.UploadDocument(requests(), timeout=timeout)
        except grpc.aio.AioRpcError as error:
            raise KnowledgeError(error) from None

    def watch_documents(self, corpus_id: str) -> AsyncIterator[ingest_pb2.DocumentChange]:
        """The corpus's documents (SNAPSHOT), SYNCED, then each change; leaving the loop cancels it."""
        return _streamed(self.documents.WatchDocuments(ingest_pb2.WatchDocumentsRequest(corpus_id=corpus_id)))

    def watch_events(self, after: str = "") -> AsyncIterator[ingest_pb2.Event]:
        """The tenant's events after the cursor ("" for the oldest kept), then live."""
        return _streamed(self.events.WatchEvents(ingest_pb2.WatchEventsRequest(after=after)))

    def query_stream(self, request: search_pb2.QueryRequest) -> AsyncIterator[search_pb2.QueryStreamResponse]:
        """Query's answer as it is written: ``started``, ``delta``s, then ``done``; leaving the
        loop cancels the call, and the model's with it."""
        return _streamed(self.search.QueryStream(search_pb2.QueryStreamRequest(query=request)))

    async def close(self) -> None:
        await self.channel.close()

    async def __aenter__(self) -> KnowledgeClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


async def _pieces(data: bytes | Iterable[bytes] | AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    if isinstance(data, bytes):
        data = [data]
    if isinstance(data, AsyncIterable):
        async for piece in data:
            for start in range(0, len(piece), CHUNK_BYTES):
                yield piece[start : start + CHUNK_BYTES]
    else:
        for piece in data:
            for start in range(0, len(piece), CHUNK_BYTES):
                yield piece[start : start + CHUNK_BYTES]


async def _streamed(call: Any) -> AsyncIterator[Any]:
    try:
        async for item in call:
            yield item
    except grpc.aio.AioRpcError as error:
        raise KnowledgeError(error) from None
    finally:
        call.cancel()  # a no-op once it ended; stops a stream its consumer left
