"""Searches and their results as the domain sees them: frozen values, validated on the way in."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from knowledge_runtime import ids
from knowledge_runtime.corpus_keys import InvalidCorpusKey, check_key
from knowledge_runtime.costs import Cost
from knowledge_runtime.filter_fields import parse_filter
from knowledge_runtime.filters import Node

from knowledge_search.domain.errors import CorpusNotFound, DocumentNotFound, InvalidSearch

MAX_QUERY_CHARS = 100_000  # what a caller may send; the embedder sees at most 3,500 of them
LEXICAL_QUERY_CHARS = 3_500  # the same budget for the lexical channel's query


class SearchMode(enum.Enum):
    HYBRID = "hybrid"
    VECTOR = "vector"
    LEXICAL = "lexical"


class Relevance(enum.Enum):
    NONE = "none"  # no results
    HIGH = "high"
    MODERATE = "moderate"
    LOW = "low"
    LEXICAL_MATCH = "lexical_match"


@dataclass(frozen=True, slots=True)
class Weights:
    """Per-channel weights of the fusion; None means "not set here"."""

    vector: float | None = None
    lexical: float | None = None

    def over(self, fallback: Weights) -> Weights:
        return Weights(
            vector=self.vector if self.vector is not None else fallback.vector,
            lexical=self.lexical if self.lexical is not None else fallback.lexical,
        )


EQUAL_WEIGHTS = Weights(vector=1.0, lexical=1.0)


@dataclass(frozen=True, slots=True)
class Filters:
    corpus_id: int | None = None
    document_id: int | None = None
    subject: str | None = None  # only documents about this user (a user_behavior entry's subject)
    exclude_provisional: bool = False  # leave out chunks marked PROVISIONAL_MARKER, before ranking
    exclude_corpora: tuple[int, ...] = ()  # e.g. the tenant's housekeeping corpora in an ordinary read
    # The corpora the caller reaches (runtime.reach); None only when it reaches every corpus the
    # tenant can see, so the query needs no such predicate. Set by the use case, never a request.
    corpus_ids: frozenset[int] | None = None
    # The tenant keys of the rows the caller may read (Reach.owners: its own, and the platform
    # tenant's when it reaches a platform-wide corpus); () means the caller's tenant alone.
    owners: tuple[str, ...] = ()
    # Who the caller is to a document's access list (Reader.principals: its token's user:<sub> and
    # group:<name>): both channels and the hydration admit only the documents whose list is empty
    # or names one of them. Set by the use case from the verified token, never a request; none
    # reads only the documents open to everyone who reaches their corpus.
    principals: frozenset[str] = frozenset()
    # The request's filter (knowledge_runtime.filters), applied inside both channels; None: none.
    condition: Node | None = None
    # The corpus named by its key instead of corpus_id: resolved to corpus_id (and cleared) by the
    # use case, within the caller's reach, before anything else reads the request.
    corpus_key: str | None = None


PROVISIONAL_MARKER = "[PROVISIONAL]"  # how a housekeeping entry not yet confirmed begins


@dataclass(frozen=True, slots=True)
class VectorSpace:
    """One model's vectors: the store they are in ("chunks": the chunks' own column; "next": the
    table a model change fills), that store's dimension (None: the column's own), and the model
    that embeds a query compared with them ('' = the embedder's current one)."""

    store: str = "chunks"
    model: str = ""
    dimension: int | None = None


CURRENT_SPACE = VectorSpace()


@dataclass(frozen=True, slots=True)
class SearchRequest:
    text: str
    filters: Filters
    top_k: int
    mode: SearchMode = SearchMode.HYBRID
    weights: Weights = Weights()
    warnings: tuple[str, ...] = ()
    rerank: bool | None = None  # None: the service default
    candidate: bool = False  # the open model change's other vectors (an evaluation), not the current ones
    # The vectors read and the model that embeds the query, fixed once per search (part of the cache key).
    space: VectorSpace | None = None

    @classmethod
    def parse(
        cls,
        text: str,
        *,
        corpus_id: str = "",
        document_id: str = "",
        top_k: int = 0,
        mode: SearchMode = SearchMode.HYBRID,
        weights: Weights = Weights(),
        default_top_k: int = 10,
        max_top_k: int = 100,
        rerank: bool | None = None,
        field: str = "query",
        filter_text: str = "",
        corpus_key: str = "",
        candidate: bool = False,
    ) -> SearchRequest:
        """``field``: the request field the text came from, named in what is refused."""
        text = text.strip()
        if not text:
            raise InvalidSearch(f"{field} must not be empty", field=field)
        if len(text) > MAX_QUERY_CHARS:
            raise InvalidSearch(f"{field} must be at most {MAX_QUERY_CHARS} characters", field=field)
        if "\x00" in text:
            raise InvalidSearch(f"{field} must not contain NUL characters", field=field)
        if top_k < 0:
            raise InvalidSearch(f"top_k must be between 1 and {max_top_k} (0 means {default_top_k})", field="top_k")
        warnings: list[str] = []
        if top_k > max_top_k:
            warnings.append(f"top_k {top_k} was clamped to {max_top_k}")
        for name, value in (("weights.vector", weights.vector), ("weights.lexical", weights.lexical)):
            if value is not None and not 0.0 <= value < float("inf"):
                raise InvalidSearch(f"{name} must be a finite number >= 0", field=name)
        if weights.vector == 0.0 and weights.lexical == 0.0:
            raise InvalidSearch("at least one channel weight must be above 0", field="weights")
        condition = parse_filter(filter_text)
        if corpus_key and corpus_id:
            raise InvalidSearch("give corpus_id or corpus_key, not both", field="corpus_key")
        if corpus_key:
            try:
                check_key(corpus_key)
            except InvalidCorpusKey as error:
                raise InvalidSearch(str(error), field="corpus_key") from None
        return cls(
            text=text,
            filters=Filters(
                corpus_id=_corpus_id(corpus_id),
                document_id=_document_id(document_id),
                condition=condition,
                corpus_key=corpus_key or None,
            ),
            top_k=default_top_k if top_k == 0 else min(top_k, max_top_k),
            mode=mode,
            weights=weights,
            warnings=tuple(warnings),
            rerank=rerank,
            candidate=candidate,
        )

    @property
    def lexical_text(self) -> str:
        return self.text[:LEXICAL_QUERY_CHARS]


def _parse_id(value: str) -> int | None:
    """An opaque identifier: empty means unset; anything that cannot be ours does not exist."""
    if not value:
        return None
    parsed = ids.parse_id(value)
    return -1 if parsed is None else parsed


def _corpus_id(value: str) -> int | None:
    parsed = _parse_id(value)
    if parsed == -1:
        raise CorpusNotFound(value)
    return parsed


def _document_id(value: str) -> int | None:
    parsed = _parse_id(value)
    if parsed == -1:
        raise DocumentNotFound(value)
    return parsed


@dataclass(frozen=True, slots=True)
class Chunk:
    """A stored chunk with what results and citations show of its document."""

    chunk_id: int
    document_id: int
    corpus_id: int
    filename: str
    section: str
    page: int | None
    content: str
    source_url: str = ""  # where a fetched page came from; empty for an upload
    extractor: str = ""  # what read the document's text (documents.extractor); empty when not recorded
    # Provenance a caller maps back to its own objects (passages by reference): the document's
    # reference, the passage's fragment and own metadata, and the document's metadata.
    document_ref: str = ""
    fragment: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    document_metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ChannelHit:
    """One channel's hit: ids and the channel's own score (cosine or BM25), never content.

    ``rank`` is 1-based in the channel's order. ``coverage`` is, for a lexical hit, its BM25
    score over the most the query's terms could score (the sum of their idf): how much of the
    query's information it matched (1.0 for a vector hit).
    """

    chunk_id: int
    document_id: int
    score: float
    rank: int
    coverage: float = 1.0


@dataclass(frozen=True, slots=True)
class Ranked:
    """A fused (or single-channel) result before its content is read: fusion decided its place.

    ``score`` stays the cosine similarity (0.0 when only the lexical channel found it).
    """

    chunk_id: int
    document_id: int
    score: float
    vector_rank: int  # 1-based; 0 when the vector channel did not return it
    lexical_rank: int  # 1-based; 0 when the lexical channel did not return it
    fused_score: float
    coverage: float = 0.0  # the lexical hit's share of the query's idf mass; 0.0 without one

    @property
    def lexical_only(self) -> bool:
        return self.vector_rank == 0


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A result: fusion decided its place; ``score`` stays the cosine similarity (0.0 lexical-only)."""

    chunk: Chunk
    score: float
    vector_rank: int  # 1-based; 0 when the vector channel did not return it
    lexical_rank: int  # 1-based; 0 when the lexical channel did not return it
    fused_score: float
    coverage: float = 0.0  # the lexical hit's share of the query's idf mass; 0.0 without one
    rerank_score: float | None = None  # the reranking model's score when the search was reranked

    @property
    def lexical_only(self) -> bool:
        return self.vector_rank == 0

    @classmethod
    def of(cls, ranked: Ranked, chunk: Chunk) -> SearchHit:
        return cls(
            chunk=chunk,
            score=ranked.score,
            vector_rank=ranked.vector_rank,
            lexical_rank=ranked.lexical_rank,
            fused_score=ranked.fused_score,
            coverage=ranked.coverage,
        )


@dataclass(frozen=True, slots=True)
class EmbeddedQuery:
    vector: list[float]
    warnings: tuple[str, ...] = ()
    cost: Cost = Cost()


@dataclass(frozen=True, slots=True)
class Reranking:
    """The reranking model's score per passage, in the order given."""

    scores: tuple[float, ...]
    cost: Cost = Cost()


@dataclass(frozen=True, slots=True)
class SearchOutcome:
    hits: tuple[SearchHit, ...]
    relevance: Relevance
    warnings: tuple[str, ...] = ()
    cost: Cost = Cost()
    degradations: tuple[str, ...] = ()  # what did not answer as usual (e.g. the vector channel)


@dataclass(frozen=True, slots=True)
class Citation:
    chunk: Chunk
    excerpt: str


@dataclass(frozen=True, slots=True)
class Answer:
    text: str
    citations: tuple[Citation, ...]
    relevance: Relevance
    cost: Cost = field(default_factory=Cost)
    # Why the configured LLM was not asked (a refusal's reason, e.g. BUDGET_EXHAUSTED) and in words.
    fallback_reason: str = ""
    fallback_message: str = ""
    # With earlier turns: the standalone query retrieval read, and how the history was used
    # when no model condensed it.
    condensed_query: str = ""
    conversation_note: str = ""
