"""Embedder use cases: what a caller can ask, independent of gRPC, PostgreSQL and the model."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TypeVar

import numpy as np
import structlog
from knowledge_runtime.auth import Scope
from knowledge_runtime.tracing import tracer

from knowledge_embedder import metrics
from knowledge_embedder.batching.runner import BatchRunner
from knowledge_embedder.domain.errors import AnchorNotFound, RerankUnavailable, TokenizerChanged
from knowledge_embedder.domain.model import (
    AnchorMatch,
    AnchorTarget,
    CostLine,
    Embedded,
    IndexResult,
    Measured,
    Price,
    Prompts,
    RerankPair,
    pool_pieces,
    require_content,
    require_passages,
    require_texts,
    top_k_of,
    truncate_query,
)
from knowledge_embedder.domain.ports import EmbeddingStore, Encoder, Reranker

log = structlog.get_logger("knowledge.embedder")
_tracer = tracer("knowledge.embedder")
T = TypeVar("T")
OPERATION = "embed"
RERANK_OPERATION = "rerank"


@dataclass(frozen=True, slots=True)
class Reranked:
    scores: tuple[float, ...]
    model_id: str
    cost: CostLine


@dataclass(frozen=True, slots=True)
class QueryVector:
    embedded: Embedded
    truncated_chars: int
    warnings: tuple[str, ...]
    cost: CostLine


@dataclass
class EmbedderUseCases:
    encoder: Encoder
    runner: BatchRunner  # the batch queue's lanes, which own the models' forward passes
    store: EmbeddingStore
    price: Price
    # Tokenising runs off the event loop too, beside (not behind) the inference thread.
    _tokenize: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="embedder-tokenize")
    )
    reranker: Reranker | None = None  # only when KNOWLEDGE_RERANK_MODEL is configured
    rerank_price: Price | None = None
    prompts: Prompts = field(default_factory=Prompts)  # the runner prepends them; here they are counted
    _prompt_tokens: dict[bool, int] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        # What a prompt adds to each input it precedes: paid for, and counted against the budget.
        for query in (False, True):
            prompt = self.prompts.of(query=query)
            with_prompt, alone = self.encoder.measure([prompt + "x", "x"]) if prompt else (Measured(0), Measured(0))
            self._prompt_tokens[query] = max(0, with_prompt.tokens - alone.tokens)

    async def embed_texts(self, scope: Scope, texts: list[str], tokenizer: str = "") -> tuple[Embedded, CostLine]:
        """``tokenizer``: the tokenizer the caller sized the texts with (its id), if any; another
        than the encoder's is refused before anything is embedded."""
        if tokenizer and tokenizer != self.encoder.tokenizer_id:
            raise TokenizerChanged(tokenizer, self.encoder.tokenizer_id)
        embedded = await self._embed(require_texts(texts), owner=scope.tenant)
        cost = self._cost(embedded)
        await self._stored(self.store.record_cost(scope.tenant, cost))
        return embedded, cost

    async def embed_query(self, scope: Scope, query: str) -> QueryVector:
        text, dropped = truncate_query(query)
        warnings: tuple[str, ...] = ()
        if dropped:
            log.warning("query_truncated", dropped_characters=dropped, kept_characters=len(text))
            warnings = (f"the query was truncated to {len(text)} characters; {dropped} characters were dropped",)
        embedded = await self._embed([text], owner=scope.tenant, interactive=True, query=True)
        cost = self._cost(embedded)
        await self._stored(self.store.record_cost(scope.tenant, cost))
        return QueryVector(embedded=embedded, truncated_chars=dropped, warnings=warnings, cost=cost)

    async def index_anchor(self, scope: Scope, content: str, target: AnchorTarget) -> IndexResult:
        embedded, vector = await self._anchor_vector(scope.tenant, content)
        cost = self._cost(embedded)
        anchor_id = await self._stored(self.store.upsert_anchor(scope.tenant, target, vector, len(content), cost))
        return IndexResult(ids=(anchor_id,), count=_windows(embedded), cost=cost, vectors=vector[None, :])

    async def refresh_anchor(self, scope: Scope, target: AnchorTarget, content: str) -> IndexResult:
        if not await self.store.anchor_exists(scope.tenant, target):
            raise AnchorNotFound(target.entity_type, target.entity_id)
        embedded, vector = await self._anchor_vector(scope.tenant, content)
        cost = self._cost(embedded)
        anchor_id = await self._stored(self.store.replace_anchor(scope.tenant, target, vector, len(content), cost))
        if anchor_id is None:  # deleted while we embedded
            raise AnchorNotFound(target.entity_type, target.entity_id)
        return IndexResult(ids=(anchor_id,), count=_windows(embedded), cost=cost, vectors=vector[None, :])

    async def search_anchors(self, scope: Scope, query: str, entity_type: str, top_k: int) -> list[AnchorMatch]:
        if entity_type:
            AnchorTarget.parse(entity_type, "-")  # the same rules as when anchors are written
        k = top_k_of(top_k)
        text, _dropped = truncate_query(query)
        embedded = await self._embed([text], owner=scope.tenant, interactive=True, query=True)
        cost = self._cost(embedded)
        return await self._stored(self.store.nearest_anchors(scope.tenant, embedded.vectors[0], entity_type, k, cost))

    async def rerank(self, scope: Scope, query: str, passages: list[str]) -> Reranked:
        """One score per passage for the query, by the cross-encoder, batched with everyone's inputs."""
        if self.reranker is None:
            raise RerankUnavailable()
        text, _dropped = truncate_query(query)
        pairs = [RerankPair(text, passage) for passage in require_passages(passages)]
        started = time.perf_counter()
        with _tracer.start_as_current_span("embedder.tokenize"):
            tokens = await asyncio.get_running_loop().run_in_executor(self._tokenize, self.reranker.measure, pairs)
        metrics.STAGE_SECONDS.labels(stage="tokenize").observe(time.perf_counter() - started)
        with _tracer.start_as_current_span("embedder.rerank") as span:
            span.set_attribute("embedder.pairs", len(pairs))
            scores = await self.runner.rerank(pairs, tokens, owner=scope.tenant)
        total = sum(tokens)
        metrics.RERANK_PAIRS.inc(len(pairs))
        metrics.RERANK_TOKENS.inc(total)
        price = self.rerank_price or Price(per_1k_tokens=0.0, currency=self.price.currency)
        cost = CostLine(
            model=self.reranker.model_id,
            operation=RERANK_OPERATION,
            texts=len(pairs),
            tokens=total,
            amount=price.of(total),
            currency=price.currency,
        )
        await self._stored(self.store.record_cost(scope.tenant, cost))
        log.info("reranked", pairs=len(pairs), tokens=total)
        return Reranked(
            scores=tuple(float(s) for s in np.asarray(scores).reshape(-1)), model_id=self.reranker.model_id, cost=cost
        )

    async def _anchor_vector(self, tenant: str, content: str) -> tuple[Embedded, np.ndarray]:
        embedded = await self._embed([require_content(content)], owner=tenant)
        return embedded, embedded.vectors[0]

    async def _embed(self, texts: list[str], *, owner: str, interactive: bool = False, query: bool = False) -> Embedded:
        """One vector per text: a text longer than the window as the re-normalised mean of its
        windows' vectors (each window queued as an input of its own, each read after the model's
        prompt). ``interactive``: someone waits for it: the queue's interactive priority, ahead
        of bulk. ``query``: a search query (the query prompt), else a passage."""
        started = time.perf_counter()
        with _tracer.start_as_current_span("embedder.tokenize"):
            measured = await asyncio.get_running_loop().run_in_executor(self._tokenize, self.encoder.measure, texts)
        metrics.STAGE_SECONDS.labels(stage="tokenize").observe(time.perf_counter() - started)
        extra = self._prompt_tokens.get(query, 0)
        if extra:
            measured = [_with_prompt(m, extra) for m in measured]
        pieces = [piece for text, m in zip(texts, measured) for piece in m.pieces(text)]
        vectors = await self.runner.embed(
            [text for text, _ in pieces],
            [tokens for _, tokens in pieces],
            interactive=interactive,
            query=query,
            owner=owner,
        )
        pooled = pool_pieces(vectors, [len(m.windows) or 1 for m in measured])
        return Embedded(vectors=pooled, measured=tuple(measured))

    def _cost(self, embedded: Embedded) -> CostLine:
        tokens = embedded.tokens
        return CostLine(
            model=self.encoder.model_id,
            operation=OPERATION,
            texts=len(embedded.measured),
            tokens=tokens,
            amount=self.price.of(tokens),
            currency=self.price.currency,
        )

    async def _stored(self, write: Awaitable[T]) -> T:
        started = time.perf_counter()
        with _tracer.start_as_current_span("embedder.store"):
            result = await write
        metrics.STAGE_SECONDS.labels(stage="store").observe(time.perf_counter() - started)
        return result

    def close(self) -> None:
        self._tokenize.shutdown(wait=False, cancel_futures=True)


def _with_prompt(measured: Measured, extra: int) -> Measured:
    """``measured`` with its prompt's tokens added to it and to each of its windows (each window
    is read after the prompt)."""
    windows = tuple(replace(w, tokens=w.tokens + extra) for w in measured.windows)
    return Measured(tokens=measured.tokens + extra * (len(windows) or 1), windows=windows)


def _windows(embedded: Embedded) -> int:
    """The windows an anchor's one text was read in (1 when it fits the window)."""
    return len(embedded.measured[0].windows) or 1
