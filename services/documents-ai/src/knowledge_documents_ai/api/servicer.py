"""DocumentsAIService over gRPC: validate, call one use case, convert."""

from __future__ import annotations

import grpc
from knowledge.v1 import documents_ai_pb2, documents_ai_pb2_grpc
from knowledge_runtime.auth import current_scope
from knowledge_runtime.ids import parse_id
from knowledge_runtime.pagination import bounded_page_size, decode_page_token, encode_page_token
from knowledge_runtime.server import ServiceSpec

from knowledge_documents_ai.api import convert
from knowledge_documents_ai.domain.errors import DocumentNotFound, InvalidRequest
from knowledge_documents_ai.usecases import DocumentsAi

EDIT, READ = "taxonomy.edit", "corpus.read"
CAPABILITIES = {
    "CreateDocumentType": EDIT,
    "ListDocumentTypes": READ,
    "RetireDocumentType": EDIT,
    "RestoreDocumentType": EDIT,
    "CreateExtractionSchema": EDIT,
    "ListExtractionSchemas": READ,
    "ClassifyDocument": READ,
    "ExtractDocument": READ,
    "ProcessDocument": EDIT,  # it may grow the taxonomy
    "ListProcessingResults": READ,
}
TYPES_PAGE = (50, 200)  # default, maximum
RESULTS_PAGE = (20, 100)
MAX_TEXT_CHARS = 100_000


def _document_id(text: str) -> int:
    """A path id that spells no id names nothing: NOT_FOUND, as another tenant's would."""
    parsed = parse_id(text)
    if parsed is None:
        raise DocumentNotFound(text)
    return parsed


class DocumentsAiServicer(documents_ai_pb2_grpc.DocumentsAIServiceServicer):
    def __init__(self, usecases: DocumentsAi) -> None:
        self._ai = usecases

    async def CreateDocumentType(
        self, request: documents_ai_pb2.CreateDocumentTypeRequest, context: grpc.aio.ServicerContext
    ) -> documents_ai_pb2.CreateDocumentTypeResponse:
        stored = await self._ai.create_type(
            current_scope(), request.name, request.description, list(request.examples), request.reason
        )
        return documents_ai_pb2.CreateDocumentTypeResponse(document_type=convert.document_type(stored))

    async def ListDocumentTypes(
        self, request: documents_ai_pb2.ListDocumentTypesRequest, context: grpc.aio.ServicerContext
    ) -> documents_ai_pb2.ListDocumentTypesResponse:
        size = bounded_page_size(request.page_size, *TYPES_PAGE)
        offset = decode_page_token(request.page_token)
        types = await self._ai.list_types(current_scope(), include_retired=request.include_retired)
        page = types[offset : offset + size]
        more = offset + size < len(types)
        return documents_ai_pb2.ListDocumentTypesResponse(
            document_types=[convert.document_type(t) for t in page],
            next_page_token=encode_page_token(offset + size) if more else "",
        )

    async def RetireDocumentType(
        self, request: documents_ai_pb2.RetireDocumentTypeRequest, context: grpc.aio.ServicerContext
    ) -> documents_ai_pb2.RetireDocumentTypeResponse:
        stored = await self._ai.set_retired(current_scope(), request.type_name, True)
        return documents_ai_pb2.RetireDocumentTypeResponse(document_type=convert.document_type(stored))

    async def RestoreDocumentType(
        self, request: documents_ai_pb2.RestoreDocumentTypeRequest, context: grpc.aio.ServicerContext
    ) -> documents_ai_pb2.RestoreDocumentTypeResponse:
        stored = await self._ai.set_retired(current_scope(), request.type_name, False)
        return documents_ai_pb2.RestoreDocumentTypeResponse(document_type=convert.document_type(stored))

    async def CreateExtractionSchema(
        self, request: documents_ai_pb2.CreateExtractionSchemaRequest, context: grpc.aio.ServicerContext
    ) -> documents_ai_pb2.CreateExtractionSchemaResponse:
        stored = await self._ai.add_schema(current_scope(), request.type_name, request.json_schema)
        return documents_ai_pb2.CreateExtractionSchemaResponse(schema=convert.schema(stored))

    async def ListExtractionSchemas(
        self, request: documents_ai_pb2.ListExtractionSchemasRequest, context: grpc.aio.ServicerContext
    ) -> documents_ai_pb2.ListExtractionSchemasResponse:
        schemas = await self._ai.list_schemas(current_scope(), request.type_name)
        return documents_ai_pb2.ListExtractionSchemasResponse(schemas=[convert.schema(s) for s in schemas])

    async def ClassifyDocument(
        self, request: documents_ai_pb2.ClassifyDocumentRequest, context: grpc.aio.ServicerContext
    ) -> documents_ai_pb2.ClassifyDocumentResponse:
        has_text = bool(request.text.strip())
        if bool(request.document_id) == has_text:
            raise InvalidRequest("document_id", "set exactly one of document_id and text")
        if len(request.text) > MAX_TEXT_CHARS:
            raise InvalidRequest("text", f"a text to classify is at most {MAX_TEXT_CHARS} characters")
        if has_text:
            outcome = await self._ai.classify(current_scope(), text=request.text)
        else:
            outcome = await self._ai.classify(current_scope(), document_id=_document_id(request.document_id))
        return convert.classify_response(outcome)

    async def ExtractDocument(
        self, request: documents_ai_pb2.ExtractDocumentRequest, context: grpc.aio.ServicerContext
    ) -> documents_ai_pb2.ExtractDocumentResponse:
        if request.schema_version < 0:
            raise InvalidRequest("schema_version", "schema_version must be >= 0 (0 means the newest)")
        outcome = await self._ai.extract(
            current_scope(), _document_id(request.document_id), request.schema_name.strip(), request.schema_version
        )
        return convert.extract_response(outcome)

    async def ProcessDocument(
        self, request: documents_ai_pb2.ProcessDocumentRequest, context: grpc.aio.ServicerContext
    ) -> documents_ai_pb2.ProcessDocumentResponse:
        result, existing = await self._ai.process(current_scope(), _document_id(request.document_id))
        return documents_ai_pb2.ProcessDocumentResponse(result=convert.processing_result(result), existing=existing)

    async def ListProcessingResults(
        self, request: documents_ai_pb2.ListProcessingResultsRequest, context: grpc.aio.ServicerContext
    ) -> documents_ai_pb2.ListProcessingResultsResponse:
        size = bounded_page_size(request.page_size, *RESULTS_PAGE)
        after = decode_page_token(request.page_token) or None
        results = await self._ai.page_results(current_scope(), _document_id(request.document_id), after, size + 1)
        page = results[:size]
        return documents_ai_pb2.ListProcessingResultsResponse(
            results=[convert.processing_result(r) for r in page],
            next_page_token=encode_page_token(page[-1].result_id) if len(results) > size else "",
        )


def service_spec(servicer: DocumentsAiServicer) -> ServiceSpec:
    return ServiceSpec(
        descriptor=documents_ai_pb2.DESCRIPTOR.services_by_name["DocumentsAIService"],
        register=lambda server: documents_ai_pb2_grpc.add_DocumentsAIServiceServicer_to_server(servicer, server),
        capabilities=CAPABILITIES,
    )
