"""SearchService over gRPC: validate, call one use case, convert."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
from knowledge.v1 import search_pb2, search_pb2_grpc
from knowledge_runtime.auth import current_scope
from knowledge_runtime.server import ServiceSpec

from knowledge_search.agent_usecases import ContextUseCases, PrefetchUseCases
from knowledge_search.api import convert
from knowledge_search.domain.errors import InvalidSearch
from knowledge_search.domain.model import SearchMode, SearchRequest
from knowledge_search.domain.prefetch import Prefetch
from knowledge_search.domain.render import render
from knowledge_search.usecases import AnswerUseCases, SearchUseCases

CAPABILITIES = {
    "Search": "search",
    "SearchDocuments": "search",
    "Query": "search",
    "QueryStream": "search",
    "GetContext": "search",
    "PrefetchContext": "search",
}
SEARCH_TOP_K = (10, 100)  # default, maximum
QUERY_TOP_K = (8, 50)


def _mode(value: int) -> SearchMode:
    parsed = convert.mode(value)
    if parsed is None:
        raise InvalidSearch(f"unknown search mode {value}", field="mode")
    return parsed


def _search_request(request, top_k: tuple[int, int], **extra) -> SearchRequest:
    """The fields all three requests share; ``extra`` adds Search's mode and weights."""
    default_top_k, max_top_k = top_k
    return SearchRequest.parse(
        request.query,
        corpus_id=request.corpus_id,
        document_id=request.document_id,
        top_k=request.top_k,
        default_top_k=default_top_k,
        max_top_k=max_top_k,
        rerank=request.rerank if request.HasField("rerank") else None,
        filter_text=request.filter,
        corpus_key=request.corpus_key,
        **extra,
    )


def _context_request(request: search_pb2.GetContextRequest) -> SearchRequest:
    default_top_k, max_top_k = QUERY_TOP_K
    return SearchRequest.parse(
        request.query,
        corpus_id=request.corpus_id,
        top_k=request.top_k,
        default_top_k=default_top_k,
        max_top_k=max_top_k,
        filter_text=request.filter,
        corpus_key=request.corpus_key,
    )


class SearchServicer(search_pb2_grpc.SearchServiceServicer):
    def __init__(
        self,
        searches: SearchUseCases,
        answers: AnswerUseCases,
        contexts: ContextUseCases | None = None,
        prefetches: PrefetchUseCases | None = None,
    ) -> None:
        self._searches = searches
        self._answers = answers
        self._contexts = contexts or ContextUseCases(answers)
        self._prefetches = prefetches

    async def Search(
        self, request: search_pb2.SearchRequest, context: grpc.aio.ServicerContext
    ) -> search_pb2.SearchResponse:
        parsed = _search_request(
            request,
            SEARCH_TOP_K,
            mode=_mode(request.mode),
            weights=convert.weights(request.weights),
            candidate=request.vectors == search_pb2.EMBEDDING_VECTORS_CANDIDATE,
        )
        return convert.search_response(await self._searches.search(current_scope(), parsed))

    async def SearchDocuments(
        self, request: search_pb2.SearchDocumentsRequest, context: grpc.aio.ServicerContext
    ) -> search_pb2.SearchDocumentsResponse:
        parsed = _search_request(request, SEARCH_TOP_K, mode=_mode(request.mode))
        history = convert.history(request.history)
        outcome, synthesis, unavailable = await self._answers.search_documents(current_scope(), parsed, history)
        return search_pb2.SearchDocumentsResponse(
            text=render(outcome.hits, outcome.relevance, synthesis, unavailable),
            relevance=convert.RELEVANCE[outcome.relevance],
            result_count=len(outcome.hits),
            synthesis=synthesis,
            results=[convert.result(hit) for hit in outcome.hits],
        )

    async def Query(
        self, request: search_pb2.QueryRequest, context: grpc.aio.ServicerContext
    ) -> search_pb2.QueryResponse:
        parsed = _search_request(request, QUERY_TOP_K)
        history = convert.history(request.history)
        return convert.query_response(await self._answers.query(current_scope(), parsed, history))

    async def QueryStream(
        self, request: search_pb2.QueryStreamRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[search_pb2.QueryStreamResponse]:
        # A client that goes away cancels this generator where it waits; the use case closes the
        # model's stream on the way out, which ends the model's call.
        parsed = _search_request(request.query, QUERY_TOP_K)
        history = convert.history(request.query.history)
        async for event in self._answers.query_stream(current_scope(), parsed, history):
            yield convert.stream_event(event)

    # ---- agent-facing reads ----

    async def GetContext(
        self, request: search_pb2.GetContextRequest, context: grpc.aio.ServicerContext
    ) -> search_pb2.GetContextResponse:
        found = await self._contexts.context(current_scope(), _context_request(request))
        return search_pb2.GetContextResponse(context=convert.knowledge_context(found))

    async def PrefetchContext(
        self, request: search_pb2.PrefetchContextRequest, context: grpc.aio.ServicerContext
    ) -> search_pb2.PrefetchContextResponse:
        # A message no search could take is the caller's mistake (400); anything that fails after
        # this is the pre-fetch's own, answered empty and degraded.
        SearchRequest.parse(request.user_message, field="user_message")
        if self._prefetches is None:
            return convert.prefetch_response(Prefetch.empty("pre-fetch is not configured", 0))
        return convert.prefetch_response(await self._prefetches.prefetch(current_scope(), request.user_message))


def service_spec(servicer: SearchServicer) -> ServiceSpec:
    return ServiceSpec(
        descriptor=search_pb2.DESCRIPTOR.services_by_name["SearchService"],
        register=lambda server: search_pb2_grpc.add_SearchServiceServicer_to_server(servicer, server),
        capabilities=CAPABILITIES,
    )
