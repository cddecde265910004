"""CorpusService over gRPC: validate, call one use case, convert."""

from __future__ import annotations

import grpc
from knowledge.v1 import ingest_pb2, ingest_pb2_grpc
from knowledge_runtime.auth import DOCUMENT_SHARE, current_scope
from knowledge_runtime.pagination import decode_page_token, encode_page_token
from knowledge_runtime.server import ServiceSpec

from knowledge_ingest.convert import corpus_message, tombstone_message
from knowledge_ingest.corpora.usecases import CorpusUseCases
from knowledge_ingest.deletion.usecases import MAX_LISTED_TOMBSTONES, TombstoneUseCases
from knowledge_ingest.guards import page_of

CAPABILITIES = {
    "CreateCorpus": "corpus.create",
    "ListCorpora": "corpus.read",
    "BindCorpus": "corpus.bind",
    "DeleteCorpus": "corpus.create",
    "SetCorpusDefaultAccess": DOCUMENT_SHARE,
}
Context = grpc.aio.ServicerContext


class CorpusServicer(ingest_pb2_grpc.CorpusServiceServicer):
    def __init__(self, corpora: CorpusUseCases, deletion: TombstoneUseCases) -> None:
        self._corpora = corpora
        self._deletion = deletion

    async def CreateCorpus(self, request: ingest_pb2.CreateCorpusRequest, context: Context) -> ingest_pb2.Corpus:
        corpus = await self._corpora.create_corpus(
            current_scope(),
            request.name,
            request.description,
            request.confidentiality,
            request.platform_wide,
            request.key,
            list(request.default_principals),
        )
        return corpus_message(corpus)

    async def ListCorpora(
        self, request: ingest_pb2.ListCorporaRequest, context: Context
    ) -> ingest_pb2.ListCorporaResponse:
        page = page_of(request.page_size, decode_page_token(request.page_token))
        corpora, next_after = await self._corpora.list_corpora(current_scope(), page)
        return ingest_pb2.ListCorporaResponse(
            corpora=[corpus_message(c) for c in corpora], next_page_token=encode_page_token(next_after)
        )

    async def BindCorpus(
        self, request: ingest_pb2.BindCorpusRequest, context: Context
    ) -> ingest_pb2.BindCorpusResponse:
        bound = await self._corpora.bind_corpus(current_scope(), request.corpus_id, request.scope)
        return ingest_pb2.BindCorpusResponse(corpus=corpus_message(bound))

    async def DeleteCorpus(
        self, request: ingest_pb2.DeleteCorpusRequest, context: Context
    ) -> ingest_pb2.DeleteCorpusResponse:
        tombstones = await self._deletion.delete_corpus(current_scope(), request.corpus_id, request.delete_documents)
        return ingest_pb2.DeleteCorpusResponse(
            corpus_id=request.corpus_id,
            deleted_document_count=len(tombstones),
            tombstones=[tombstone_message(t) for t in tombstones[:MAX_LISTED_TOMBSTONES]],
        )

    async def SetCorpusDefaultAccess(
        self, request: ingest_pb2.SetCorpusDefaultAccessRequest, context: Context
    ) -> ingest_pb2.SetCorpusDefaultAccessResponse:
        changed = await self._corpora.set_default_access(
            current_scope(), request.corpus_id, list(request.default_principals)
        )
        return ingest_pb2.SetCorpusDefaultAccessResponse(corpus=corpus_message(changed))


def service_spec(servicer: CorpusServicer) -> ServiceSpec:
    return ServiceSpec(
        descriptor=ingest_pb2.DESCRIPTOR.services_by_name["CorpusService"],
        register=lambda server: ingest_pb2_grpc.add_CorpusServiceServicer_to_server(servicer, server),
        capabilities=CAPABILITIES,
    )
