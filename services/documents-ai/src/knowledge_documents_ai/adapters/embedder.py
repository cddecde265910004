"""Types as anchors in the embedding gatekeeper: ``Index`` (kind ANCHOR, entity type
``document_type``, entity id the type's name) writes one, ``SearchAnchors`` scores a text
against the tenant's. The embedder records its own costs. A user's token lacks the internal
``embed`` capability, so with a signing key this service calls with a short-lived token of its
own for the caller's tenant (else the caller's is forwarded). An embedder that cannot be reached
is RUNTIME_UNAVAILABLE; what it answered keeps its reason (runtime ``rpc_errors``)."""

from __future__ import annotations

from collections.abc import Callable

import grpc
from knowledge.v1 import embedder_pb2, embedder_pb2_grpc
from knowledge_runtime.clients import channel
from knowledge_runtime.errors import DomainError
from knowledge_runtime.refusals import Refusal, Refused
from knowledge_runtime.rpc_errors import domain_error_from, made_by_channel

from knowledge_documents_ai.domain.taxonomy import ANCHOR_ENTITY_TYPE, DocumentType, anchor_text


class GrpcAnchors:
    def __init__(self, address: str, *, timeout_s: float = 30.0, token_for: Callable[[str], str] | None = None) -> None:
        self._channel = channel(address)
        self._stub = embedder_pb2_grpc.EmbedderServiceStub(self._channel)
        self._timeout_s = timeout_s
        self._token_for = token_for

    def _metadata(self, tenant: str) -> tuple[tuple[str, str], ...] | None:
        if self._token_for is None:
            return None
        return (("authorization", f"Bearer {self._token_for(tenant)}"),)

    async def index_type(self, tenant: str, kind: DocumentType) -> None:
        request = embedder_pb2.IndexRequest(
            content=anchor_text(kind),
            kind=embedder_pb2.INDEX_KIND_ANCHOR,
            anchor=embedder_pb2.AnchorTarget(entity_type=ANCHOR_ENTITY_TYPE, entity_id=kind.name),
        )
        try:
            await self._stub.Index(request, timeout=self._timeout_s, metadata=self._metadata(tenant))
        except grpc.aio.AioRpcError as error:
            raise _translated(error) from None

    async def scores(self, tenant: str, text: str, top_k: int) -> dict[str, float]:
        request = embedder_pb2.SearchAnchorsRequest(query=text, entity_type=ANCHOR_ENTITY_TYPE, top_k=top_k)
        try:
            reply = await self._stub.SearchAnchors(request, timeout=self._timeout_s, metadata=self._metadata(tenant))
        except grpc.aio.AioRpcError as error:
            raise _translated(error) from None
        return {m.target.entity_id: m.score for m in reply.matches}

    async def close(self) -> None:
        await self._channel.close()


def _translated(error: grpc.aio.AioRpcError) -> DomainError:
    if made_by_channel(error):
        return Refused(Refusal.RUNTIME_UNAVAILABLE, "the embedder is unavailable", metadata={"runtime": "embedder"})
    return domain_error_from(error, "embedder")
