"""Domain values to and from knowledge.v1 messages."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf import struct_pb2
from knowledge.v1 import search_pb2
from knowledge_runtime.convert import cost

from knowledge_search.domain.context import FactStatus, KnowledgeContext, Support
from knowledge_search.domain.conversation import Role, Turn, parse_history
from knowledge_search.domain.model import Answer, Chunk, Relevance, SearchHit, SearchMode, SearchOutcome, Weights
from knowledge_search.domain.prefetch import Prefetch
from knowledge_search.domain.streaming import Started

MODES: dict[int, SearchMode] = {
    search_pb2.SEARCH_MODE_UNSPECIFIED: SearchMode.HYBRID,
    search_pb2.SEARCH_MODE_HYBRID: SearchMode.HYBRID,
    search_pb2.SEARCH_MODE_VECTOR: SearchMode.VECTOR,
    search_pb2.SEARCH_MODE_LEXICAL: SearchMode.LEXICAL,
}
RELEVANCE = {
    Relevance.NONE: search_pb2.RELEVANCE_UNSPECIFIED,
    Relevance.HIGH: search_pb2.RELEVANCE_HIGH,
    Relevance.MODERATE: search_pb2.RELEVANCE_MODERATE,
    Relevance.LOW: search_pb2.RELEVANCE_LOW,
    Relevance.LEXICAL_MATCH: search_pb2.RELEVANCE_LEXICAL_MATCH,
}


def mode(value: int) -> SearchMode | None:
    """None for a value this server does not know (a newer client)."""
    return MODES.get(value)


def weights(message: search_pb2.ChannelWeights) -> Weights:
    return Weights(
        vector=message.vector if message.HasField("vector") else None,
        lexical=message.lexical if message.HasField("lexical") else None,
    )


def struct(values: Mapping[str, Any]) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(values)
    return message


def provenance(chunk: Chunk) -> dict[str, Any]:
    """What a hit, a citation and evidence say of where they come from, for the caller to map back."""
    return {
        "document_ref": chunk.document_ref,
        "fragment": chunk.fragment,
        "metadata": struct(chunk.metadata),
        "document_metadata": struct(chunk.document_metadata),
    }


def result(hit: SearchHit) -> search_pb2.SearchResult:
    chunk = hit.chunk
    return search_pb2.SearchResult(
        **provenance(chunk),
        document_id=str(chunk.document_id),
        filename=chunk.filename,
        chunk_id=str(chunk.chunk_id),
        section=chunk.section,
        page=chunk.page or 0,
        score=hit.score,
        vector_rank=hit.vector_rank,
        lexical_rank=hit.lexical_rank,
        fused_score=hit.fused_score,
        content=chunk.content,
        corpus_id=str(chunk.corpus_id),
        source_url=chunk.source_url,
        rerank_score=hit.rerank_score or 0.0,
    )


def search_response(outcome: SearchOutcome) -> search_pb2.SearchResponse:
    return search_pb2.SearchResponse(
        relevance=RELEVANCE[outcome.relevance],
        results=[result(hit) for hit in outcome.hits],
        warnings=list(outcome.warnings),
    )


def query_response(answer: Answer) -> search_pb2.QueryResponse:
    return search_pb2.QueryResponse(
        answer=answer.text,
        citations=[
            search_pb2.Citation(
                document_id=str(c.chunk.document_id),
                filename=c.chunk.filename,
                page=c.chunk.page or 0,
                section=c.chunk.section,
                excerpt=c.excerpt,
                chunk_id=str(c.chunk.chunk_id),
                source_url=c.chunk.source_url,
                **provenance(c.chunk),
            )
            for c in answer.citations
        ],
        relevance=RELEVANCE[answer.relevance],
        cost=cost(answer.cost),
        fallback_reason=f"REFUSAL_REASON_{answer.fallback_reason or 'UNSPECIFIED'}",
        fallback_message=answer.fallback_message,
        condensed_query=answer.condensed_query,
        conversation_note=answer.conversation_note,
    )


def history(turns) -> tuple[Turn, ...]:
    """A request's earlier turns, checked (``conversation.parse_history``)."""
    return parse_history([(ROLES.get(turn.role), turn.text) for turn in turns])


ROLES: dict[int, Role] = {search_pb2.TURN_ROLE_USER: "user", search_pb2.TURN_ROLE_ASSISTANT: "assistant"}


def stream_event(event: Started | str | Answer) -> search_pb2.QueryStreamResponse:
    if isinstance(event, str):
        return search_pb2.QueryStreamResponse(delta=event)
    if isinstance(event, Started):
        return search_pb2.QueryStreamResponse(
            started=search_pb2.QueryStarted(
                relevance=RELEVANCE[event.relevance],
                condensed_query=event.condensed_query,
                source_count=event.source_count,
            )
        )
    return search_pb2.QueryStreamResponse(done=query_response(event))


# ---- agent-facing reads ----

SUPPORT = {
    Support.SUPPORTED: search_pb2.SUPPORT_LEVEL_SUPPORTED,
    Support.PARTIAL: search_pb2.SUPPORT_LEVEL_PARTIAL,
    Support.UNKNOWN: search_pb2.SUPPORT_LEVEL_UNKNOWN,
}
FACT_STATUS = {
    FactStatus.GROUNDED: search_pb2.FACT_STATUS_GROUNDED,
    FactStatus.UNRESOLVED: search_pb2.FACT_STATUS_UNRESOLVED,
}


def knowledge_context(value: KnowledgeContext) -> search_pb2.KnowledgeContext:
    meta = value.metadata
    return search_pb2.KnowledgeContext(
        facts=[
            search_pb2.Fact(
                statement=f.statement,
                support=SUPPORT[f.support],
                confidence=f.confidence,
                evidence_ids=list(f.evidence_ids),
                status=FACT_STATUS[f.status],
            )
            for f in value.facts
        ],
        evidence=[
            search_pb2.Evidence(
                evidence_id=e.evidence_id,
                document_id=str(e.hit.chunk.document_id),
                filename=e.hit.chunk.filename,
                page=e.hit.chunk.page or 0,
                section=e.hit.chunk.section,
                source_url=e.hit.chunk.source_url,
                excerpt=e.excerpt,
                excerpt_sha256=e.excerpt_sha256,
                extractor=e.extractor,
                chunk_id=str(e.hit.chunk.chunk_id),
                score=e.hit.score,
                **provenance(e.hit.chunk),
            )
            for e in value.evidence
        ],
        metadata=search_pb2.ContextMetadata(
            query=meta.query,
            scope=meta.scope,
            backend=meta.backend,
            fact_count=len(value.facts),
            evidence_count=len(value.evidence),
            unresolved_count=value.unresolved_count,
            elapsed_ms=meta.elapsed_ms,
            truncated=meta.truncated,
            degradations=list(meta.degradations),
            relevance=RELEVANCE[meta.relevance],
        ),
        rendered=value.rendered,
    )


def prefetch_response(value: Prefetch) -> search_pb2.PrefetchContextResponse:
    return search_pb2.PrefetchContextResponse(
        rendered=value.rendered,
        degraded=value.degraded,
        degradations=list(value.degradations),
        entry_count=value.entry_count,
        elapsed_ms=value.elapsed_ms,
    )
