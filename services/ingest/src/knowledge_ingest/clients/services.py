"""Clients of the content-index, embedder and search services.

Ingest calls them with a token it signs for the tenant it works for, carrying only the
internal capability each call needs: a user's token has no ``blob.write`` or ``embed``, and
a background job has no user token at all.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import cast

import grpc
import structlog
from knowledge.v1 import (
    content_index_pb2,
    content_index_pb2_grpc,
    embedder_pb2,
    embedder_pb2_grpc,
    search_pb2,
    search_pb2_grpc,
)
from knowledge_runtime.auth import CLEARANCE_CLAIM, SCOPE_CLAIM
from knowledge_runtime.chunking import EmbeddingWindow
from knowledge_runtime.clients import channel
from knowledge_runtime.errors import DomainError, Unavailable
from knowledge_runtime.refusals import EMBEDDING_SERVER
from knowledge_runtime.rpc_errors import callee_error_info, domain_error_from, made_by_channel
from knowledge_runtime.service_tokens import ServiceTokenSigner
from knowledge_runtime.tokens import TokenCounter

from knowledge_ingest.clients.kept_blobs import KeptBlobs
from knowledge_ingest.domain.errors import DependencyNotReady
from knowledge_ingest.domain.evaluation import EvaluationSet
from knowledge_ingest.domain.ports import StoredBlob

log = structlog.get_logger("knowledge.ingest.clients")
WRITE_CHUNK_BYTES = 256 * 1024
CANCEL_GRACE_S = 60.0
TOKENIZER_CHANGED = "TOKENIZER_CHANGED"


def _translate(error: grpc.aio.AioRpcError, what: str) -> DomainError:
    """The runtime's one translation, except for a dependency that went away under the call: that
    is DependencyNotReady (the job spends no attempt), not a failure to retry later."""
    if _restarting(error):
        return DependencyNotReady(what)
    return domain_error_from(error, what)


def _restarting(error: grpc.aio.AioRpcError) -> bool:
    """The service went away under the call: its connection failed or dropped (UNAVAILABLE with
    no status of the service's own), it answered that it is stopping, or it cancelled the call
    as it stopped (this client never cancels through here), or its embedding server is down."""
    if error.code() == grpc.StatusCode.CANCELLED or made_by_channel(error, (grpc.StatusCode.UNAVAILABLE,)):
        return True
    info = callee_error_info(error)
    if error.code() != grpc.StatusCode.UNAVAILABLE or info is None:
        return False
    # The embedder's remote embedding server is down: the job waits for it as for a restart.
    return info.reason.endswith("_STOPPING") or info.metadata.get("runtime") == EMBEDDING_SERVER


async def wait_connected(channel: grpc.aio.Channel) -> None:
    """Until the channel is READY (connected), however long the service takes to come up."""
    state = channel.get_state(try_to_connect=True)
    while state != grpc.ChannelConnectivity.READY:
        await channel.wait_for_state_change(state)
        state = channel.get_state(try_to_connect=True)


class ServicesReadiness:
    """The readiness gate of the workers: content-index's and the embedder's channels."""

    def __init__(self, **channels: grpc.aio.Channel) -> None:
        self._channels = channels

    async def wait_ready(self) -> None:
        await asyncio.gather(*(wait_connected(channel) for channel in self._channels.values()))

    def waiting_for(self) -> list[str]:
        return [
            name
            for name, channel in self._channels.items()
            if channel.get_state(try_to_connect=True) != grpc.ChannelConnectivity.READY
        ]


class ContentIndexClient:
    """``kept``: where the small blobs written here are kept for the job that reads them next."""

    def __init__(
        self,
        address: str,
        signer: ServiceTokenSigner,
        read_timeout_s: float = 300.0,
        kept: KeptBlobs | None = None,
    ) -> None:
        self._channel = channel(address, untraced=("WriteBlob",))  # cancellable mid-stream (see channel)
        self._read_timeout_s = read_timeout_s
        self._stub = content_index_pb2_grpc.ContentIndexServiceStub(self._channel)
        self._signer = signer
        self._kept = kept

    async def write(self, tenant: str, filename: str, mime_type: str, chunks: AsyncIterator[bytes]) -> StoredBlob:
        # grpc.aio swallows an exception raised inside a request iterator and leaves the call
        # hanging; so a failing source (e.g. the upload cap crossed) cancels the call instead,
        # content-index discards the partial write, and the source's error is raised here.
        failure: list[BaseException] = []
        recorded = None
        if self._kept is not None:
            chunks, recorded = self._kept.recorder(chunks)

        async def requests() -> AsyncIterator[content_index_pb2.WriteBlobRequest]:
            yield content_index_pb2.WriteBlobRequest(
                header=content_index_pb2.WriteBlobHeader(filename=filename, mime_type=mime_type)
            )
            try:
                async for chunk in chunks:
                    for start in range(0, len(chunk), WRITE_CHUNK_BYTES):
                        yield content_index_pb2.WriteBlobRequest(chunk=chunk[start : start + WRITE_CHUNK_BYTES])
            except Exception as error:  # noqa: BLE001 - handed to the caller or logged, never swallowed silently
                failure.append(error)
                call.cancel()
                # Returning would half-close the stream, which could look like a complete upload
                # (a truncated blob row). The cancellation ends this iterator's task instead;
                # the sleep is only a bound should it not.
                await asyncio.sleep(CANCEL_GRACE_S)

        call = self._stub.WriteBlob(requests(), metadata=self._signer.metadata(tenant, ["blob.write"]))
        try:
            reply = await call
        except asyncio.CancelledError:
            if failure and call.cancelled():
                raise failure[0] from None
            raise
        except grpc.aio.AioRpcError as error:
            if failure:
                raise failure[0] from None
            raise _translate(error, "content index") from None
        blob = StoredBlob(int(reply.blob.blob_id), reply.blob.size_bytes, reply.already_existed)
        data = recorded() if recorded is not None else None
        if self._kept is not None and data is not None and len(data) == blob.size_bytes:
            self._kept.keep(tenant, blob.blob_id, data)
        return blob

    def kept(self, tenant: str, blob_id: int) -> bytes | None:
        return self._kept.take(tenant, blob_id) if self._kept is not None else None

    async def import_file(self, tenant: str, path: str, mime_type: str) -> StoredBlob:
        """Content-index stores the file at ``path`` (resolved and fenced again on its side)."""
        try:
            reply = await self._stub.ImportFile(
                content_index_pb2.ImportFileRequest(path=path, mime_type=mime_type),
                metadata=self._signer.metadata(tenant, ["blob.write"]),
                timeout=self._read_timeout_s,
            )
        except grpc.aio.AioRpcError as error:
            raise _translate(error, "content index") from None
        return StoredBlob(int(reply.blob.blob_id), reply.blob.size_bytes, reply.already_existed)

    @property
    def grpc_channel(self) -> grpc.aio.Channel:
        return self._channel

    async def read_to(self, tenant: str, blob_id: int, target: Path) -> int:
        request = content_index_pb2.ReadBlobRequest(blob_id=str(blob_id))
        size = 0
        try:
            with open(target, "wb") as handle:  # noqa: ASYNC230 - a local staging file, written chunk by chunk
                # wait_for_ready: a content-index that is (re)starting delays the read, not fails it
                async for reply in self._stub.ReadBlob(
                    request,
                    metadata=self._signer.metadata(tenant, ["blob.read"]),
                    wait_for_ready=True,
                    timeout=self._read_timeout_s,
                ):
                    if reply.WhichOneof("payload") == "chunk":
                        handle.write(reply.chunk)
                        size += len(reply.chunk)
        except grpc.aio.AioRpcError as error:
            raise _translate(error, "content index") from None
        return size

    async def close(self) -> None:
        await self._channel.close()


class EmbedderClient:
    """``EmbedTexts``, and the embedder's window with the tokenizer to count it in: read once
    through ``ReadTokenizer`` and kept until the embedder refuses texts sized with it."""

    def __init__(self, address: str, signer: ServiceTokenSigner, timeout_s: float = 300.0) -> None:
        self._channel = channel(address)
        self._stub = embedder_pb2_grpc.EmbedderServiceStub(self._channel)
        self._signer = signer
        self._timeout_s = timeout_s
        self._window: EmbeddingWindow | None = None
        self._reading = asyncio.Lock()  # the first jobs wait for one read, not one each

    @property
    def grpc_channel(self) -> grpc.aio.Channel:
        return self._channel

    async def window(self, tenant: str) -> EmbeddingWindow:
        async with self._reading:
            if self._window is None:
                self._window = await self._read_window(tenant)
            return self._window

    async def embed(self, tenant: str, texts: Sequence[str], tokenizer: str = "") -> list[list[float]]:
        try:
            reply = await self._stub.EmbedTexts(
                embedder_pb2.EmbedTextsRequest(texts=list(texts), tokenizer_sha256=tokenizer),
                metadata=self._signer.metadata(tenant, ["embed"]),
                timeout=self._timeout_s,
                wait_for_ready=True,  # an embedder restarting between two batches delays the next one
            )
        except grpc.aio.AioRpcError as error:
            info = callee_error_info(error)
            if info is not None and info.reason == TOKENIZER_CHANGED:
                # Another model answers now: its tokenizer is read again, and the job runs again
                # (without spending an attempt), its text cut in the new model's tokens.
                self._window = None
                raise DependencyNotReady("embedder") from None
            raise _translate(error, "embedder") from None
        return [list(vector.values) for vector in reply.vectors]

    async def held(self, tenant: str) -> list[tuple[str, int]]:
        try:
            reply = await self._stub.Info(
                embedder_pb2.InfoRequest(),
                metadata=self._signer.metadata(tenant, ["embed"]),
                timeout=self._timeout_s,
            )
        except grpc.aio.AioRpcError as error:
            raise _translate(error, "embedder") from None
        return [(m.model_id, m.dimension) for m in reply.models] or [(reply.model_id, reply.dimension)]

    async def embed_with(self, tenant: str, texts: Sequence[str], model: str) -> list[list[float]]:
        """As ``embed``, by the named model, with no tokenizer check: the texts were cut for
        another model (the current one), and a text over this one's window is pooled."""
        try:
            reply = await self._stub.EmbedTexts(
                embedder_pb2.EmbedTextsRequest(texts=list(texts), model=model),
                metadata=self._signer.metadata(tenant, ["embed"]),
                timeout=self._timeout_s,
                wait_for_ready=True,
            )
        except grpc.aio.AioRpcError as error:
            raise _translate(error, "embedder") from None
        return [list(vector.values) for vector in reply.vectors]

    async def _read_window(self, tenant: str) -> EmbeddingWindow:
        description: embedder_pb2.TokenizerDescription | None = None
        parts: list[bytes] = []
        try:
            async for reply in self._stub.ReadTokenizer(
                embedder_pb2.ReadTokenizerRequest(),
                metadata=self._signer.metadata(tenant, ["embed"]),
                timeout=self._timeout_s,
                wait_for_ready=True,
            ):
                if reply.WhichOneof("payload") == "tokenizer":
                    description = reply.tokenizer
                else:
                    parts.append(reply.chunk)
        except grpc.aio.AioRpcError as error:
            raise _translate(error, "embedder") from None
        data = b"".join(parts)
        if description is None or hashlib.sha256(data).hexdigest() != description.tokenizer_sha256:
            raise Unavailable("the embedder's tokenizer arrived incomplete; it is read again")
        counter = await asyncio.to_thread(TokenCounter.from_json, data.decode())
        if counter.identity != description.tokenizer_sha256:  # never count in a tokenizer that differs
            raise Unavailable("the embedder's tokenizer could not be rebuilt as it was sent")
        log.info(
            "embedder_tokenizer_read",
            model=description.model_id,
            window=description.max_seq_length,
            tokenizer_sha256=description.tokenizer_sha256,
        )
        return EmbeddingWindow(
            tokens=description.max_seq_length, measure=counter, tokenizer_id=description.tokenizer_sha256
        )

    async def close(self) -> None:
        await self._channel.close()


class SearchClient:
    """``Search`` for the model change's evaluation: a set's query on its corpus, with the reach of
    the operator who stored the set (its scope claim and clearance, signed into the token) and
    only the ``search`` capability."""

    def __init__(self, address: str, signer: ServiceTokenSigner, timeout_s: float = 60.0) -> None:
        self._channel = channel(address)
        self._stub = search_pb2_grpc.SearchServiceStub(self._channel)
        self._signer = signer
        self._timeout_s = timeout_s

    async def ranked(
        self, evaluation_set: EvaluationSet, text: str, mode: str, candidate: bool, top_k: int
    ) -> list[str]:
        claims = {SCOPE_CLAIM: evaluation_set.scope_claim, CLEARANCE_CLAIM: evaluation_set.clearance.value}
        vectors = search_pb2.EMBEDDING_VECTORS_CANDIDATE if candidate else search_pb2.EMBEDDING_VECTORS_CURRENT
        try:
            reply = await self._stub.Search(
                search_pb2.SearchRequest(
                    query=text,
                    corpus_id=str(evaluation_set.corpus_id),
                    top_k=top_k,
                    mode=cast(search_pb2.SearchMode, search_pb2.SearchMode.Value(f"SEARCH_MODE_{mode}")),
                    vectors=vectors,
                ),
                metadata=self._signer.metadata(evaluation_set.tenant, ["search"], claims),
                timeout=self._timeout_s,
                wait_for_ready=True,
            )
        except grpc.aio.AioRpcError as error:
            raise _translate(error, "search") from None
        return [result.document_id for result in reply.results]

    async def close(self) -> None:
        await self._channel.close()
