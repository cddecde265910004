"""Domain values to and from knowledge.v1 messages."""

from __future__ import annotations

from knowledge.v1 import common_pb2, search_pb2

from knowledge_search.domain.model import Answer, Cost, Relevance, SearchHit, SearchMode, SearchOutcome, Weights

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


def result(hit: SearchHit) -> search_pb2.SearchResult:
    chunk = hit.chunk
    return search_pb2.SearchResult(
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


def cost(value: Cost) -> common_pb2.Cost:
    return common_pb2.Cost(
        amount=value.amount,
        currency=value.currency,
        input_tokens=sum(item.input_tokens for item in value.items),
        output_tokens=sum(item.output_tokens for item in value.items),
        items=[
            common_pb2.CostItem(
                model_id=item.model_id,
                operation=item.operation,
                texts=item.texts,
                input_tokens=item.input_tokens,
                output_tokens=item.output_tokens,
                amount=item.amount,
            )
            for item in value.items
        ],
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
            )
            for c in answer.citations
        ],
        relevance=RELEVANCE[answer.relevance],
        cost=cost(answer.cost),
        fallback_reason=f"REFUSAL_REASON_{answer.fallback_reason or 'UNSPECIFIED'}",
        fallback_message=answer.fallback_message,
    )
