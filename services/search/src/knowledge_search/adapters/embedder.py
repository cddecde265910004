"""The query embedder and reranker: the embedding gatekeeper's EmbedQuery and Rerank over gRPC.

The channel forwards trace context (runtime ``clients``). A user's token rightly lacks the
internal ``embed`` capability, so when the service has a signing key it calls with a
short-lived token of its own for the caller's tenant; without one the caller's token is
forwarded. The embedder's errors reach search's callers through the runtime's one
translation (``rpc_errors``): its code and reason (``EMBEDDER_OVERLOADED``,
``CAPABILITY_MISSING``...), or ``RUNTIME_UNAVAILABLE`` when it cannot be reached, or has no
reranking model for a rerank.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import grpc
from knowledge.v1 import embedder_pb2, embedder_pb2_grpc
from knowledge_runtime.breaker import BreakerState, CircuitBreaker
from knowledge_runtime.calls import caller_out_of_time
from knowledge_runtime.clients import channel
from knowledge_runtime.convert import cost_from_message
from knowledge_runtime.errors import DomainError
from knowledge_runtime.logging import get_logger
from knowledge_runtime.refusals import Refusal, Refused
from knowledge_runtime.rpc_errors import domain_error_from, made_by_channel

from knowledge_search.domain.errors import EmbedderUnavailable, RerankUnavailable
from knowledge_search.domain.model import EmbeddedQuery, Reranking


class GrpcQueryEmbedder:
    def __init__(self, address: str, *, timeout_s: float = 30.0, token_for: Callable[[str], str] | None = None) -> None:
        self._channel = channel(address)
        self._stub = embedder_pb2_grpc.EmbedderServiceStub(self._channel)
        self._timeout_s = timeout_s
        self._token_for = token_for

    def _metadata(self, tenant: str):
        if self._token_for is None:
            return None
        return (("authorization", f"Bearer {self._token_for(tenant)}"),)

    async def embed_query(self, tenant: str, text: str, model: str = "") -> EmbeddedQuery:
        metadata = self._metadata(tenant)
        try:
            reply = await self._stub.EmbedQuery(
                embedder_pb2.EmbedQueryRequest(query=text, model=model), timeout=self._timeout_s, metadata=metadata
            )
        except grpc.aio.AioRpcError as error:
            raise _translated(error) from None
        if not reply.vector.values:
            raise EmbedderUnavailable()
        return EmbeddedQuery(
            vector=list(reply.vector.values), warnings=tuple(reply.warnings), cost=cost_from_message(reply.cost)
        )

    async def rerank(self, tenant: str, query: str, passages: list[str]) -> Reranking:
        try:
            reply = await self._stub.Rerank(
                embedder_pb2.RerankRequest(query=query, passages=passages),
                timeout=self._timeout_s,
                metadata=self._metadata(tenant),
            )
        except grpc.aio.AioRpcError as error:
            raise _translated(error) from None
        if len(reply.scores) != len(passages):
            raise EmbedderUnavailable()
        return Reranking(scores=tuple(reply.scores), cost=cost_from_message(reply.cost))

    async def close(self) -> None:
        await self._channel.close()


log = get_logger("knowledge.search")
T = TypeVar("T")


class BreakingEmbedder:
    """The query embedder and reranker behind a circuit breaker (knowledge_runtime.breaker): while the
    embedder is out, calls fail at once with EmbedderUnavailable (the pre-fetch and context take
    their keyword fallback, a rerank its fused order) instead of each waiting for its deadline.

    A call its caller gave up on after a silence opens the breaker but is left to finish (for at
    most one cool-off, and never past the deadline it was given): a cold embedder that answers late
    closes it again at once, a stopped one keeps it open. A call that ran out of its caller's
    deadline counts as given up on, never as an outage by itself."""

    def __init__(self, inner: GrpcQueryEmbedder, breaker: CircuitBreaker) -> None:
        self._inner = inner
        self._breaker = breaker
        self._lingering: set[asyncio.Future] = set()

    async def embed_query(self, tenant: str, text: str, model: str = "") -> EmbeddedQuery:
        extra = {"model": model} if model else {}
        return await self._call(lambda: self._inner.embed_query(tenant, text, **extra))

    async def rerank(self, tenant: str, query: str, passages: list[str]) -> Reranking:
        return await self._call(lambda: self._inner.rerank(tenant, query, passages))

    async def close(self) -> None:
        for task in list(self._lingering):
            task.cancel()
        await self._inner.close()

    async def _call(self, call: Callable[[], Awaitable[T]]) -> T:
        breaker = self._breaker
        if not breaker.allow():
            raise EmbedderUnavailable()
        started = breaker.clock()
        task = asyncio.ensure_future(call())
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError:  # the caller's deadline passed
            self._abandoned(task, started)
            raise
        except EmbedderUnavailable:  # unreachable, timed out, or its runtime down: the outage itself
            if caller_out_of_time():  # the caller's deadline ended the call: it says no more than a cancel
                self._timed_out_with_caller(started)
            else:
                self._failed("error")
            raise
        except Exception:  # the embedder answered (a refusal, an overload): it is up
            self._succeeded()
            raise
        self._succeeded()
        return result

    def _abandoned(self, task: asyncio.Future, started: float) -> None:
        was = self._breaker.state
        if not self._breaker.abandoned(started):  # given up on quickly: says nothing of the embedder
            task.cancel()
            return
        self._failed("silence", was=was)
        self._lingering.add(task)
        expiry = asyncio.get_running_loop().call_later(self._breaker.cool_off_s, task.cancel)
        task.add_done_callback(lambda done: self._settled(done, expiry))

    def _timed_out_with_caller(self, started: float) -> None:
        """The call was given its caller's deadline (runtime ``calls``) and ran out of it: as a
        call given up on, a failure only after a silence; nothing is left running."""
        was = self._breaker.state
        if self._breaker.abandoned(started):
            self._failed("silence", was=was)

    def _settled(self, task: asyncio.Future, expiry: asyncio.TimerHandle) -> None:
        """A call left to finish ended: an answer closes the breaker; an outage keeps it open."""
        expiry.cancel()
        self._lingering.discard(task)
        if task.cancelled():
            return
        if isinstance(task.exception(), EmbedderUnavailable):
            self._failed("error")
        else:
            self._succeeded()

    def _succeeded(self) -> None:
        if self._breaker.state is not BreakerState.CLOSED:
            log.info("embedder_breaker_closed")
        self._breaker.succeeded()

    def _failed(self, after: str, *, was: BreakerState | None = None) -> None:
        """Open the breaker, said once as it opens; ``was``: its state before, when a call given
        up on (``CircuitBreaker.abandoned``) has opened it already."""
        if (self._breaker.state if was is None else was) is not BreakerState.OPEN:
            log.warning("embedder_breaker_open", cool_off_s=self._breaker.cool_off_s, after=after)
        self._breaker.failed()


def breaking(inner: GrpcQueryEmbedder, cool_off_s: float, *, slow_s: float) -> GrpcQueryEmbedder | BreakingEmbedder:
    """The embedder behind a breaker of this cool-off and silence (monotonic clock); a cool-off
    of 0 leaves it bare."""
    if cool_off_s <= 0:
        return inner
    return BreakingEmbedder(inner, CircuitBreaker(time.monotonic, cool_off_s=cool_off_s, slow_s=slow_s))


def _translated(error: grpc.aio.AioRpcError) -> DomainError:
    """The runtime's one translation, except that an embedder that cannot be reached (down,
    unreachable, timed out: a status the channel made, not the embedder) is RUNTIME_UNAVAILABLE,
    since no answer needing it can be given. What the embedder itself answered keeps its reason
    (EMBEDDER_OVERLOADED: back off; EMBEDDER_STOPPING: retry on another replica)."""
    if made_by_channel(error):
        return EmbedderUnavailable()
    translated = domain_error_from(error, "embedder")
    if isinstance(translated, Refused) and translated.refusal is Refusal.RUNTIME_UNAVAILABLE:
        return RerankUnavailable() if translated.metadata.get("runtime") == "reranker" else EmbedderUnavailable()
    return translated
