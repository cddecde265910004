"""What the use cases need from the outside world."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Collection, Sequence
from typing import Protocol

from knowledge_runtime.auth import Scope
from knowledge_runtime.costs import Cost, CostItem
from knowledge_runtime.reach import Placement, Reach, Reader
from knowledge_runtime.refusals import Refused

from knowledge_search.domain.answer import Source, Synthesis
from knowledge_search.domain.conversation import Turn
from knowledge_search.domain.model import (
    CURRENT_SPACE,
    ChannelHit,
    Chunk,
    EmbeddedQuery,
    Filters,
    Reranking,
    VectorSpace,
    Weights,
)


class QueryEmbedder(Protocol):
    async def embed_query(self, tenant: str, text: str, model: str = "") -> EmbeddedQuery:
        """The query's unit vector, embedded for the tenant by ``model`` ('' = the current one);
        an ``Unavailable`` when the embedder is down."""


class Reranker(Protocol):
    async def rerank(self, tenant: str, query: str, passages: list[str]) -> Reranking:
        """One score per passage (higher is more relevant); RerankUnavailable when no model is configured."""


class ChunkIndex(Protocol):
    async def reader(self, scope: Scope) -> Reader:
        """The caller's resolved reader; Refused(SCOPE_UNRESOLVED) when its token's scope does not resolve."""

    async def reach_for(self, tenant: str, reader: Reader) -> Reach:
        """The corpora ``reader`` reaches (runtime.reach decides)."""

    async def keyed(self, tenant: str, key: str) -> list[Placement]:
        """Where the tenant's live corpora bearing ``key`` sit (``corpus_keys.resolve`` picks one)."""

    async def generation(self, tenant: str, reader: Reader) -> int:
        """Grows whenever what ``reader`` sees may have changed (a document in its node or an ancestor)."""

    async def vector_search(
        self, tenant: str, vector: Sequence[float], filters: Filters, depth: int, space: VectorSpace = CURRENT_SPACE
    ) -> list[ChannelHit]:
        """The tenant's ``depth`` nearest chunks by cosine in ``space``'s store, best first;
        score = similarity in [0, 1]."""

    async def lexical_search(self, tenant: str, text: str, filters: Filters, depth: int) -> list[ChannelHit]:
        """The tenant's ``depth`` best chunks by BM25, best first; score = the BM25 score."""

    async def chunks(
        self, tenant: str, chunk_ids: Sequence[int], owners: Sequence[str] = (), principals: Collection[str] = ()
    ) -> dict[int, Chunk]:
        """Content, section, page and filename of the chunks among ``chunk_ids`` whose rows carry one
        of ``owners`` (the channels' ``Filters.owners``; the tenant's own when empty) and whose
        document's access list admits ``principals`` (``Filters.principals``); gone ones absent."""

    async def check_filters(self, tenant: str, filters: Filters) -> None:
        """DocumentNotFound unless a document filter names the tenant's (or a platform-wide) document
        within ``filters.corpus_ids`` when that is set, and within the corpus filter when that is set
        (the corpus filter itself is checked against the reach before: ``usecases.within``), whose
        access list admits ``filters.principals``."""

    async def corpus_weights(self, corpus_id: int) -> Weights:
        """The corpus's fusion weights; unset fields when it has none."""


class Synthesiser(Protocol):
    model_id: str
    grades: bool  # whether ``graded=True`` gets a support level per statement

    async def synthesise(
        self, question: str, sources: Sequence[Source], *, graded: bool = False, history: Sequence[Turn] = ()
    ) -> Synthesis:
        """An answer citing sources as [n]; LlmUnavailable when a remote model cannot answer.

        ``graded``: each statement starts with its support level (``context.GRADING_INSTRUCTION``)
        where the synthesiser can judge it; the extractive one quotes, so it never labels."""

    def stream(
        self, question: str, sources: Sequence[Source], *, history: Sequence[Turn] = ()
    ) -> AsyncGenerator[str | Synthesis]:
        """The answer as it is written: pieces of its text, then the whole :class:`Synthesis`
        last. ``history``: the conversation before the question, for a model to read (the
        extractive synthesiser quotes the sources, whatever was said before). Closing the
        iterator early stops the writing (a model's call is ended)."""


class Condenser(Protocol):
    async def condense(self, question: str, history: Sequence[Turn]) -> tuple[str, Cost]:
        """One standalone query for retrieval from the question and the conversation before it;
        LlmUnavailable when the model cannot answer."""


class CostLedger(Protocol):
    async def record(self, tenant: str, item: CostItem) -> None:
        """Stores one cost record for the tenant."""


class SystemCorpora(Protocol):
    async def housekeeping(self, tenant: str) -> dict[str, int]:
        """The tenant's housekeeping corpora that exist, by name (created on demand by ingest)."""


class LlmBudget(Protocol):
    async def refusal(self, tenant: str) -> Refused | None:
        """BUDGET_EXHAUSTED when the tenant's LLM spend this month has reached its budget."""


class VectorSpaces(Protocol):
    async def space(self, candidate: bool) -> VectorSpace:
        """The vectors search reads now (``candidate``: the open model change's other ones), and
        the model that embeds a query for them; ModelChangeNotFound when there are none."""
