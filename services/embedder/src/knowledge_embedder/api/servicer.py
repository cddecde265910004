"""EmbedderService over gRPC (internal): validate, call one use case, convert."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import grpc
from knowledge.v1 import embedder_pb2, embedder_pb2_grpc
from knowledge_runtime.auth import current_scope
from knowledge_runtime.server import ServiceSpec

from knowledge_embedder.api import convert
from knowledge_embedder.domain.errors import ChunkIndexingMoved, InvalidInput
from knowledge_embedder.usecases import EmbedderUseCases

TOKENIZER_CHUNK_BYTES = 1024 * 1024
CAPABILITIES = {
    "Info": "embed",
    "ReadTokenizer": "embed",
    "EmbedTexts": "embed",
    "EmbedQuery": "embed",
    "Index": "embed",
    "RefreshAnchor": "embed",
    "SearchAnchors": "embed",
    "Rerank": "embed",
}


class EmbedderServicer(embedder_pb2_grpc.EmbedderServiceServicer):
    def __init__(self, models: EmbedderUseCases | Sequence[EmbedderUseCases], *, max_batch_tokens: int) -> None:
        """``models``: the current model's use cases first, then the next model's, if any."""
        held = [models] if isinstance(models, EmbedderUseCases) else list(models)
        self._usecases = held[0]
        self._models = {m.encoder.model_id: m for m in held}
        self._max_batch_tokens = max_batch_tokens

    def _model(self, name: str) -> EmbedderUseCases:
        """The model a request names (empty: the current one)."""
        if not name:
            return self._usecases
        found = self._models.get(name)
        if found is None:
            raise InvalidInput(f"the embedder holds no model {name[:120]!r}; Info lists those it holds", field="model")
        return found

    async def Info(
        self, request: embedder_pb2.InfoRequest, context: grpc.aio.ServicerContext
    ) -> embedder_pb2.InfoResponse:
        current_scope()
        encoder = self._usecases.encoder
        return embedder_pb2.InfoResponse(
            model_id=encoder.model_id,
            dimension=encoder.dimension,
            device=encoder.device,
            max_seq_length=encoder.max_seq_length,
            backend=encoder.backend,
            max_batch_tokens=self._max_batch_tokens,
            tokenizer_sha256=encoder.tokenizer_id,
            models=[
                embedder_pb2.EmbeddingModel(
                    model_id=m.encoder.model_id,
                    dimension=m.encoder.dimension,
                    backend=m.encoder.backend,
                    max_seq_length=m.encoder.max_seq_length,
                    tokenizer_sha256=m.encoder.tokenizer_id,
                )
                for m in self._models.values()
            ],
        )

    async def ReadTokenizer(
        self, request: embedder_pb2.ReadTokenizerRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[embedder_pb2.ReadTokenizerResponse]:
        current_scope()
        encoder = self._usecases.encoder
        data = encoder.tokenizer_json().encode()
        yield embedder_pb2.ReadTokenizerResponse(
            tokenizer=embedder_pb2.TokenizerDescription(
                model_id=encoder.model_id,
                tokenizer_sha256=encoder.tokenizer_id,
                max_seq_length=encoder.max_seq_length,
                size_bytes=len(data),
            )
        )
        for start in range(0, len(data), TOKENIZER_CHUNK_BYTES):
            yield embedder_pb2.ReadTokenizerResponse(chunk=data[start : start + TOKENIZER_CHUNK_BYTES])

    async def EmbedTexts(
        self, request: embedder_pb2.EmbedTextsRequest, context: grpc.aio.ServicerContext
    ) -> embedder_pb2.EmbedTextsResponse:
        embedded, cost = await self._model(request.model).embed_texts(
            current_scope(), list(request.texts), request.tokenizer_sha256
        )
        return embedder_pb2.EmbedTextsResponse(
            vectors=[convert.vector(row) for row in embedded.vectors],
            token_counts=[m.tokens for m in embedded.measured],
            pooled_indexes=embedded.pooled_indexes,
            cost=convert.cost(cost),
        )

    async def EmbedQuery(
        self, request: embedder_pb2.EmbedQueryRequest, context: grpc.aio.ServicerContext
    ) -> embedder_pb2.EmbedQueryResponse:
        result = await self._model(request.model).embed_query(current_scope(), request.query)
        return embedder_pb2.EmbedQueryResponse(
            vector=convert.vector(result.embedded.vectors[0]),
            truncated_characters=result.truncated_chars,
            warnings=list(result.warnings),
            cost=convert.cost(result.cost),
        )

    async def Index(
        self, request: embedder_pb2.IndexRequest, context: grpc.aio.ServicerContext
    ) -> embedder_pb2.IndexResponse:
        binding = request.WhichOneof("binding")
        if request.kind == embedder_pb2.INDEX_KIND_CHUNK or binding == "document":
            raise ChunkIndexingMoved()
        if request.kind != embedder_pb2.INDEX_KIND_ANCHOR:
            raise InvalidInput("kind must be INDEX_KIND_ANCHOR", field="kind")
        if binding != "anchor":
            raise InvalidInput("INDEX_KIND_ANCHOR needs an anchor binding", field="binding")
        result = await self._usecases.index_anchor(
            current_scope(), request.content, convert.anchor_target(request.anchor, "anchor")
        )
        return embedder_pb2.IndexResponse(
            chunk_ids=[str(i) for i in result.ids],
            chunk_count=result.count,
            cost=convert.cost(result.cost),
            vectors=[convert.vector(row) for row in result.vectors] if request.return_vectors else [],
        )

    async def RefreshAnchor(
        self, request: embedder_pb2.RefreshAnchorRequest, context: grpc.aio.ServicerContext
    ) -> embedder_pb2.RefreshAnchorResponse:
        target = convert.anchor_target(request.target, "target")
        result = await self._usecases.refresh_anchor(current_scope(), target, request.content)
        return embedder_pb2.RefreshAnchorResponse(
            anchor_id=str(result.ids[0]),
            piece_count=result.count,
            cost=convert.cost(result.cost),
        )

    async def SearchAnchors(
        self, request: embedder_pb2.SearchAnchorsRequest, context: grpc.aio.ServicerContext
    ) -> embedder_pb2.SearchAnchorsResponse:
        matches = await self._usecases.search_anchors(
            current_scope(), request.query, request.entity_type, request.top_k
        )
        return embedder_pb2.SearchAnchorsResponse(matches=[convert.anchor_match(m) for m in matches])

    async def Rerank(
        self, request: embedder_pb2.RerankRequest, context: grpc.aio.ServicerContext
    ) -> embedder_pb2.RerankResponse:
        result = await self._usecases.rerank(current_scope(), request.query, list(request.passages))
        return embedder_pb2.RerankResponse(
            scores=list(result.scores), model_id=result.model_id, cost=convert.cost(result.cost)
        )


def service_spec(servicer: EmbedderServicer) -> ServiceSpec:
    return ServiceSpec(
        descriptor=embedder_pb2.DESCRIPTOR.services_by_name["EmbedderService"],
        register=lambda server: embedder_pb2_grpc.add_EmbedderServiceServicer_to_server(servicer, server),
        capabilities=CAPABILITIES,
        # Internal: only service tokens reach it (its capabilities are internal ones), and they
        # name no scope; it holds no corpus a scope could reach.
        unscoped=list(CAPABILITIES),
    )
