"""DocumentService over gRPC: validate, call one use case, convert."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
from knowledge.v1 import ingest_pb2, ingest_pb2_grpc
from knowledge_runtime.auth import AUDIT_READ, DOCUMENT_SHARE, current_scope
from knowledge_runtime.pagination import decode_page_token, encode_page_token
from knowledge_runtime.server import ServiceSpec

from knowledge_ingest.convert import document_message, struct_values, tombstone_message
from knowledge_ingest.deletion.usecases import TombstoneUseCases
from knowledge_ingest.documents.usecases import DocumentUseCases
from knowledge_ingest.domain.errors import InvalidRequest
from knowledge_ingest.domain.text import TextPage
from knowledge_ingest.domain.watch import DocumentChange
from knowledge_ingest.guards import page_of

CAPABILITIES = {
    "GetDocument": "corpus.read",
    "UpdateDocument": "document.upload",
    "ListDocuments": "corpus.read",
    "BatchGetDocuments": "corpus.read",
    "GetDocumentText": "corpus.read",
    "MoveDocuments": "document.upload",
    "DeleteDocument": "document.upload",
    "WatchDocuments": "corpus.read",
    "ListTombstones": AUDIT_READ,
    "GetPromptContext": "corpus.read",
    "SetDocumentAccess": DOCUMENT_SHARE,
}
Context = grpc.aio.ServicerContext


def change_message(change: DocumentChange) -> ingest_pb2.DocumentChange:
    return ingest_pb2.DocumentChange(
        kind=f"DOCUMENT_CHANGE_KIND_{change.kind.value}",
        document_id=str(change.document_id) if change.document_id is not None else "",
        document=document_message(change.document) if change.document is not None else None,
    )


def text_message(page: TextPage) -> ingest_pb2.GetDocumentTextResponse:
    message = ingest_pb2.GetDocumentTextResponse(
        document_id=str(page.document_id), text=page.text, source_url=page.source_url, extractor=page.extractor
    )
    if page.page is not None:
        message.page = page.page
        message.page_count = page.page_count or 0
    if page.next_page is not None:
        message.next_page = page.next_page
    if page.previous_page is not None:
        message.previous_page = page.previous_page
    return message


UPDATABLE = ("metadata", "filename")


def update_fields(request: ingest_pb2.UpdateDocumentRequest) -> tuple[dict[str, Any] | None, str | None]:
    """(metadata, filename) to set from the request's document: those update_mask names ("*":
    both), or without a mask those the document sets; None for a field left as it is."""
    given = request.document
    if given.document_id and given.document_id != request.document_id:
        raise InvalidRequest("document.document_id must be empty or the document_id", field="document.document_id")
    paths = list(request.update_mask.paths)
    if not paths:
        paths = [
            name
            for name, set_ in (("metadata", given.HasField("metadata")), ("filename", bool(given.filename)))
            if set_
        ]
    if paths == ["*"]:
        paths = list(UPDATABLE)
    for path in paths:
        if path not in UPDATABLE:
            raise InvalidRequest(
                f"update_mask path {path[:60]!r} cannot be changed; the paths are {', '.join(UPDATABLE)} or *",
                field="update_mask",
            )
    if not paths:
        raise InvalidRequest("nothing to change: set document.metadata or document.filename", field="update_mask")
    metadata = struct_values(given.metadata) if "metadata" in paths else None
    filename = given.filename if "filename" in paths else None
    return metadata, filename


class DocumentServicer(ingest_pb2_grpc.DocumentServiceServicer):
    def __init__(self, documents: DocumentUseCases, deletion: TombstoneUseCases) -> None:
        self._documents = documents
        self._deletion = deletion

    async def GetDocument(self, request: ingest_pb2.GetDocumentRequest, context: Context) -> ingest_pb2.Document:
        return document_message(await self._documents.get(current_scope(), request.document_id))

    async def UpdateDocument(
        self, request: ingest_pb2.UpdateDocumentRequest, context: Context
    ) -> ingest_pb2.UpdateDocumentResponse:
        metadata, filename = update_fields(request)
        updated = await self._documents.update(current_scope(), request.document_id, metadata, filename)
        return ingest_pb2.UpdateDocumentResponse(document=document_message(updated))

    async def ListDocuments(
        self, request: ingest_pb2.ListDocumentsRequest, context: Context
    ) -> ingest_pb2.ListDocumentsResponse:
        page = page_of(request.page_size, decode_page_token(request.page_token))
        documents, next_after = await self._documents.list(
            current_scope(), request.corpus_id, page, request.filter, request.corpus_key
        )
        return ingest_pb2.ListDocumentsResponse(
            documents=[document_message(d) for d in documents], next_page_token=encode_page_token(next_after)
        )

    async def BatchGetDocuments(
        self, request: ingest_pb2.BatchGetDocumentsRequest, context: Context
    ) -> ingest_pb2.BatchGetDocumentsResponse:
        documents, missing = await self._documents.batch_get(current_scope(), list(request.document_ids))
        return ingest_pb2.BatchGetDocumentsResponse(
            documents=[document_message(d) for d in documents], not_found_ids=missing
        )

    async def GetDocumentText(
        self, request: ingest_pb2.GetDocumentTextRequest, context: Context
    ) -> ingest_pb2.GetDocumentTextResponse:
        return text_message(await self._documents.text(current_scope(), request.document_id, request.page))

    async def MoveDocuments(
        self, request: ingest_pb2.MoveDocumentsRequest, context: Context
    ) -> ingest_pb2.MoveDocumentsResponse:
        moved = await self._documents.move(
            current_scope(),
            request.target_corpus_id,
            list(request.document_ids),
            request.source_corpus_id,
            request.all_documents,
        )
        return ingest_pb2.MoveDocumentsResponse(
            moved_count=moved.count, moved_document_ids=[str(d) for d in moved.document_ids]
        )

    async def DeleteDocument(
        self, request: ingest_pb2.DeleteDocumentRequest, context: Context
    ) -> ingest_pb2.DeleteDocumentResponse:
        deletion = await self._deletion.delete_document(current_scope(), request.document_id, request.reason)
        return ingest_pb2.DeleteDocumentResponse(
            document_id=str(deletion.tombstone.document_id),
            deleted_chunk_count=deletion.tombstone.chunk_count,
            cancelled_job_id=deletion.cancelled_job_id or "",
            tombstone=tombstone_message(deletion.tombstone),
        )

    async def WatchDocuments(
        self, request: ingest_pb2.WatchDocumentsRequest, context: Context
    ) -> AsyncIterator[ingest_pb2.DocumentChange]:
        async for change in self._documents.watch(
            current_scope(), request.corpus_id, request.filter, request.corpus_key
        ):
            yield change_message(change)

    async def ListTombstones(
        self, request: ingest_pb2.ListTombstonesRequest, context: Context
    ) -> ingest_pb2.ListTombstonesResponse:
        page = page_of(request.page_size, decode_page_token(request.page_token))
        tombstones, next_after = await self._deletion.list(current_scope(), request.corpus_id, page)
        return ingest_pb2.ListTombstonesResponse(
            tombstones=[tombstone_message(t) for t in tombstones], next_page_token=encode_page_token(next_after)
        )

    async def GetPromptContext(
        self, request: ingest_pb2.GetPromptContextRequest, context: Context
    ) -> ingest_pb2.GetPromptContextResponse:
        text, documents, corpora = await self._documents.prompt_context(current_scope())
        return ingest_pb2.GetPromptContextResponse(text=text, document_count=documents, corpus_count=corpora)

    async def SetDocumentAccess(
        self, request: ingest_pb2.SetDocumentAccessRequest, context: Context
    ) -> ingest_pb2.SetDocumentAccessResponse:
        document, previous = await self._documents.set_access(
            current_scope(), request.document_id, list(request.principals)
        )
        return ingest_pb2.SetDocumentAccessResponse(
            document=document_message(document) if document is not None else None, previous_principals=previous
        )


def service_spec(servicer: DocumentServicer) -> ServiceSpec:
    return ServiceSpec(
        descriptor=ingest_pb2.DESCRIPTOR.services_by_name["DocumentService"],
        register=lambda server: ingest_pb2_grpc.add_DocumentServiceServicer_to_server(servicer, server),
        capabilities=CAPABILITIES,
    )
