"""IngestService over gRPC: validate, call one use case, convert.

RPCs not overridden here answer UNIMPLEMENTED (from the generated base) until their issue lands.
"""

from __future__ import annotations

import grpc
from knowledge.v1 import ingest_pb2, ingest_pb2_grpc
from knowledge_runtime.auth import current_scope
from knowledge_runtime.pagination import decode_page_token, encode_page_token
from knowledge_runtime.server import ServiceSpec

from knowledge_ingest.api.convert import corpus_message
from knowledge_ingest.usecases import CorpusUseCases, page_of

CAPABILITIES = {
    "CreateCorpus": "corpus.create",
    "ListCorpora": "corpus.read",
    "ListDocuments": "corpus.read",
    "GetDocument": "corpus.read",
    "GetDocumentText": "corpus.read",
    "GetPromptContext": "corpus.read",
    "MoveDocuments": "document.upload",
    "DeleteDocument": "document.upload",
    "UploadDocument": "document.upload",
    "GetIngestJob": "document.upload",
    "CancelIngestJob": "document.upload",
    "RetryIngestJob": "document.upload",
    "IngestText": "document.upload",
}


class IngestServicer(ingest_pb2_grpc.IngestServiceServicer):
    def __init__(self, corpora: CorpusUseCases) -> None:
        self._corpora = corpora

    async def CreateCorpus(
        self, request: ingest_pb2.CreateCorpusRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.Corpus:
        corpus = await self._corpora.create_corpus(current_scope(), request.name, request.description)
        return corpus_message(corpus)

    async def ListCorpora(
        self, request: ingest_pb2.ListCorporaRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.ListCorporaResponse:
        page = page_of(request.page_size, decode_page_token(request.page_token))
        corpora, next_after = await self._corpora.list_corpora(current_scope(), page)
        return ingest_pb2.ListCorporaResponse(
            corpora=[corpus_message(c) for c in corpora], next_page_token=encode_page_token(next_after)
        )


def service_spec(servicer: IngestServicer) -> ServiceSpec:
    return ServiceSpec(
        descriptor=ingest_pb2.DESCRIPTOR.services_by_name["IngestService"],
        register=lambda server: ingest_pb2_grpc.add_IngestServiceServicer_to_server(servicer, server),
        capabilities=CAPABILITIES,
    )
