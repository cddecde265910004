"""The services the tools call, over gRPC, as the caller (``knowledge_runtime.clients.channel``
forwards the token :func:`knowledge_mcp.caller.acting_as` binds).

Ingest, search and documents-ai through the generated client (``knowledge_client``): each unary
RPC raises ``KnowledgeError`` with the catalogue's reason. The embedder for anchors only: it is
internal and admits a service token's ``embed``, so a user's token is refused there
(CAPABILITY_MISSING), as it would be on any other path. Holds no model and no SQL.
"""

from __future__ import annotations

from knowledge.v1 import documents_ai_pb2, embedder_pb2, embedder_pb2_grpc, ingest_pb2, search_pb2
from knowledge_client import KnowledgeClient, raising
from knowledge_runtime.clients import channel

from knowledge_mcp.caller import request_metadata
from knowledge_mcp.config import McpSettings

LISTING_PAGE = 1000  # ListCorpora's and ListDocuments' largest page
MAX_LISTED_CORPORA = 1000  # a hint lists corpora from at most this many


class Services:
    def __init__(self, settings: McpSettings) -> None:
        self._timeout = settings.call_timeout_s
        self._ingest = KnowledgeClient(channel=channel(settings.ingest_address))
        self._search = KnowledgeClient(channel=channel(settings.search_address))
        self._docai = KnowledgeClient(channel=channel(settings.documents_ai_address))
        self._embedder_channel = channel(settings.embedder_address)
        self._embedder = raising(
            embedder_pb2_grpc.EmbedderServiceStub(self._embedder_channel),
            embedder_pb2.DESCRIPTOR.services_by_name["EmbedderService"],
        )

    def _options(self) -> dict:
        return {"timeout": self._timeout, "metadata": request_metadata()}

    # -- search ---------------------------------------------------------------------------

    async def search_documents(self, request: search_pb2.SearchDocumentsRequest) -> search_pb2.SearchDocumentsResponse:
        return await self._search.search.SearchDocuments(request, **self._options())

    async def context(self, request: search_pb2.GetContextRequest) -> search_pb2.GetContextResponse:
        return await self._search.search.GetContext(request, **self._options())

    async def prefetch(self, user_message: str) -> search_pb2.PrefetchContextResponse:
        request = search_pb2.PrefetchContextRequest(user_message=user_message)
        return await self._search.search.PrefetchContext(request, **self._options())

    # -- ingest ---------------------------------------------------------------------------

    async def document_text(self, document_id: str, page: int) -> ingest_pb2.GetDocumentTextResponse:
        request = ingest_pb2.GetDocumentTextRequest(document_id=document_id, page=page)
        return await self._ingest.documents.GetDocumentText(request, **self._options())

    async def corpora(self) -> list[ingest_pb2.Corpus]:
        """Every corpus the caller lists (up to MAX_LISTED_CORPORA), oldest first."""
        found: list[ingest_pb2.Corpus] = []
        token = ""
        while len(found) < MAX_LISTED_CORPORA:
            request = ingest_pb2.ListCorporaRequest(page_size=LISTING_PAGE, page_token=token)
            page = await self._ingest.corpora.ListCorpora(request, **self._options())
            found.extend(page.corpora)
            token = page.next_page_token
            if not token:
                break
        return found[:MAX_LISTED_CORPORA]

    async def documents(self, corpus_id: str, limit: int) -> list[ingest_pb2.Document]:
        """The first ``limit`` documents of a corpus (at most one page)."""
        request = ingest_pb2.ListDocumentsRequest(corpus_id=corpus_id, page_size=min(limit, LISTING_PAGE))
        return list((await self._ingest.documents.ListDocuments(request, **self._options())).documents)

    async def create_corpus(self, name: str, description: str) -> ingest_pb2.Corpus:
        request = ingest_pb2.CreateCorpusRequest(name=name, description=description)
        return await self._ingest.corpora.CreateCorpus(request, **self._options())

    async def move(self, request: ingest_pb2.MoveDocumentsRequest) -> ingest_pb2.MoveDocumentsResponse:
        return await self._ingest.documents.MoveDocuments(request, **self._options())

    async def ingest_text(self, request: ingest_pb2.IngestTextRequest) -> ingest_pb2.IngestTextResponse:
        return await self._ingest.jobs.IngestText(request, **self._options())

    async def job(self, job_id: str) -> ingest_pb2.IngestJob:
        request = ingest_pb2.GetIngestJobRequest(job_id=job_id)
        return await self._ingest.jobs.GetIngestJob(request, **self._options())

    async def prompt_context(self) -> ingest_pb2.GetPromptContextResponse:
        return await self._ingest.documents.GetPromptContext(ingest_pb2.GetPromptContextRequest(), **self._options())

    # -- documents-ai ---------------------------------------------------------------------

    async def classify(self, document_id: str) -> documents_ai_pb2.ClassifyDocumentResponse:
        request = documents_ai_pb2.ClassifyDocumentRequest(document_id=document_id)
        return await self._docai.documents_ai.ClassifyDocument(request, **self._options())

    async def extract(
        self, document_id: str, schema_name: str, schema_version: int
    ) -> documents_ai_pb2.ExtractDocumentResponse:
        request = documents_ai_pb2.ExtractDocumentRequest(
            document_id=document_id, schema_name=schema_name, schema_version=schema_version
        )
        return await self._docai.documents_ai.ExtractDocument(request, **self._options())

    async def process(self, document_id: str) -> documents_ai_pb2.ProcessDocumentResponse:
        request = documents_ai_pb2.ProcessDocumentRequest(document_id=document_id)
        return await self._docai.documents_ai.ProcessDocument(request, **self._options())

    async def document_types(self) -> list[documents_ai_pb2.DocumentType]:
        request = documents_ai_pb2.ListDocumentTypesRequest(page_size=200)
        return list((await self._docai.documents_ai.ListDocumentTypes(request, **self._options())).document_types)

    # -- the embedder's anchors -----------------------------------------------------------

    async def index_anchor(self, entity_type: str, entity_id: str, content: str) -> embedder_pb2.IndexResponse:
        request = embedder_pb2.IndexRequest(
            content=content,
            kind=embedder_pb2.INDEX_KIND_ANCHOR,
            anchor=embedder_pb2.AnchorTarget(entity_type=entity_type, entity_id=entity_id),
        )
        return await self._embedder.Index(request, **self._options())

    async def refresh_anchor(
        self, entity_type: str, entity_id: str, content: str
    ) -> embedder_pb2.RefreshAnchorResponse:
        request = embedder_pb2.RefreshAnchorRequest(
            target=embedder_pb2.AnchorTarget(entity_type=entity_type, entity_id=entity_id), content=content
        )
        return await self._embedder.RefreshAnchor(request, **self._options())

    async def close(self) -> None:
        for client in (self._ingest, self._search, self._docai):
            await client.close()
        await self._embedder_channel.close()
