"""The query embedder: the embedding gatekeeper's EmbedQuery over gRPC.

The channel forwards trace context (runtime ``clients``). A user's token rightly lacks the
internal ``embed`` capability, so when the service has a signing key it calls with a
short-lived token of its own for the caller's tenant; without one the caller's token is
forwarded. Statuses the caller can act on keep their meaning; anything else means the
embedder is unavailable.
"""

from __future__ import annotations

import grpc
from knowledge.v1 import embedder_pb2, embedder_pb2_grpc
from collections.abc import Callable

from knowledge_runtime.clients import channel
from knowledge_runtime.errors import InvalidArgument, PermissionDenied, ResourceExhausted, Unauthenticated

from knowledge_search.domain.errors import EmbedderUnavailable
from knowledge_search.domain.model import Cost, CostItem, EmbeddedQuery


def cost_from_message(message) -> Cost:
    return Cost(
        currency=message.currency or "USD",
        items=tuple(
            CostItem(
                model_id=item.model_id,
                operation=item.operation,
                texts=item.texts,
                input_tokens=item.input_tokens,
                output_tokens=item.output_tokens,
                amount=item.amount,
            )
            for item in message.items
        ),
    )


class GrpcQueryEmbedder:
    def __init__(
        self, address: str, *, timeout_s: float = 30.0, token_for: Callable[[str], str] | None = None
    ) -> None:
        self._channel = channel(address)
        self._stub = embedder_pb2_grpc.EmbedderServiceStub(self._channel)
        self._timeout_s = timeout_s
        self._token_for = token_for

    async def embed_query(self, tenant: str, text: str) -> EmbeddedQuery:
        metadata = None
        if self._token_for is not None:
            metadata = (("authorization", f"Bearer {self._token_for(tenant)}"),)
        try:
            reply = await self._stub.EmbedQuery(
                embedder_pb2.EmbedQueryRequest(query=text), timeout=self._timeout_s, metadata=metadata
            )
        except grpc.aio.AioRpcError as error:
            raise _domain_error(error) from None
        if not reply.vector.values:
            raise EmbedderUnavailable()
        return EmbeddedQuery(
            vector=list(reply.vector.values), warnings=tuple(reply.warnings), cost=cost_from_message(reply.cost)
        )

    async def close(self) -> None:
        await self._channel.close()


def _domain_error(error: grpc.aio.AioRpcError):
    code = error.code()
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return ResourceExhausted("the embedder is overloaded; retry later", reason="EMBEDDER_OVERLOADED")
    if code == grpc.StatusCode.PERMISSION_DENIED:
        return PermissionDenied("the caller may not embed queries", reason="EMBEDDER_PERMISSION_DENIED")
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return Unauthenticated("the embedder refused the caller's token", reason="EMBEDDER_UNAUTHENTICATED")
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return InvalidArgument("the embedder refused the query", reason="QUERY_NOT_EMBEDDABLE")
    return EmbedderUnavailable()
