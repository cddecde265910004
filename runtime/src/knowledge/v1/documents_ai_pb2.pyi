import datetime

from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from knowledge.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DocumentType(_message.Message):
    __slots__ = ("name", "description", "examples", "added_by", "add_time", "reason", "origin", "proposed_for_document_id", "retired", "schema_version")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    EXAMPLES_FIELD_NUMBER: _ClassVar[int]
    ADDED_BY_FIELD_NUMBER: _ClassVar[int]
    ADD_TIME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    PROPOSED_FOR_DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    RETIRED_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    examples: _containers.RepeatedScalarFieldContainer[str]
    added_by: str
    add_time: _timestamp_pb2.Timestamp
    reason: str
    origin: str
    proposed_for_document_id: str
    retired: bool
    schema_version: int
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., examples: _Optional[_Iterable[str]] = ..., added_by: _Optional[str] = ..., add_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., reason: _Optional[str] = ..., origin: _Optional[str] = ..., proposed_for_document_id: _Optional[str] = ..., retired: _Optional[bool] = ..., schema_version: _Optional[int] = ...) -> None: ...

class CreateDocumentTypeRequest(_message.Message):
    __slots__ = ("name", "description", "examples", "reason")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    EXAMPLES_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    examples: _containers.RepeatedScalarFieldContainer[str]
    reason: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., examples: _Optional[_Iterable[str]] = ..., reason: _Optional[str] = ...) -> None: ...

class CreateDocumentTypeResponse(_message.Message):
    __slots__ = ("document_type",)
    DOCUMENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    document_type: DocumentType
    def __init__(self, document_type: _Optional[_Union[DocumentType, _Mapping]] = ...) -> None: ...

class ListDocumentTypesRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "include_retired")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_RETIRED_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    include_retired: bool
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., include_retired: _Optional[bool] = ...) -> None: ...

class ListDocumentTypesResponse(_message.Message):
    __slots__ = ("document_types", "next_page_token")
    DOCUMENT_TYPES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    document_types: _containers.RepeatedCompositeFieldContainer[DocumentType]
    next_page_token: str
    def __init__(self, document_types: _Optional[_Iterable[_Union[DocumentType, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class RetireDocumentTypeRequest(_message.Message):
    __slots__ = ("type_name",)
    TYPE_NAME_FIELD_NUMBER: _ClassVar[int]
    type_name: str
    def __init__(self, type_name: _Optional[str] = ...) -> None: ...

class RetireDocumentTypeResponse(_message.Message):
    __slots__ = ("document_type",)
    DOCUMENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    document_type: DocumentType
    def __init__(self, document_type: _Optional[_Union[DocumentType, _Mapping]] = ...) -> None: ...

class RestoreDocumentTypeRequest(_message.Message):
    __slots__ = ("type_name",)
    TYPE_NAME_FIELD_NUMBER: _ClassVar[int]
    type_name: str
    def __init__(self, type_name: _Optional[str] = ...) -> None: ...

class RestoreDocumentTypeResponse(_message.Message):
    __slots__ = ("document_type",)
    DOCUMENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    document_type: DocumentType
    def __init__(self, document_type: _Optional[_Union[DocumentType, _Mapping]] = ...) -> None: ...

class ExtractionSchema(_message.Message):
    __slots__ = ("type_name", "version", "json_schema", "added_by", "add_time", "origin")
    TYPE_NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    JSON_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    ADDED_BY_FIELD_NUMBER: _ClassVar[int]
    ADD_TIME_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    type_name: str
    version: int
    json_schema: str
    added_by: str
    add_time: _timestamp_pb2.Timestamp
    origin: str
    def __init__(self, type_name: _Optional[str] = ..., version: _Optional[int] = ..., json_schema: _Optional[str] = ..., added_by: _Optional[str] = ..., add_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., origin: _Optional[str] = ...) -> None: ...

class CreateExtractionSchemaRequest(_message.Message):
    __slots__ = ("type_name", "json_schema")
    TYPE_NAME_FIELD_NUMBER: _ClassVar[int]
    JSON_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    type_name: str
    json_schema: str
    def __init__(self, type_name: _Optional[str] = ..., json_schema: _Optional[str] = ...) -> None: ...

class CreateExtractionSchemaResponse(_message.Message):
    __slots__ = ("schema",)
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    schema: ExtractionSchema
    def __init__(self, schema: _Optional[_Union[ExtractionSchema, _Mapping]] = ...) -> None: ...

class ListExtractionSchemasRequest(_message.Message):
    __slots__ = ("type_name",)
    TYPE_NAME_FIELD_NUMBER: _ClassVar[int]
    type_name: str
    def __init__(self, type_name: _Optional[str] = ...) -> None: ...

class ListExtractionSchemasResponse(_message.Message):
    __slots__ = ("schemas",)
    SCHEMAS_FIELD_NUMBER: _ClassVar[int]
    schemas: _containers.RepeatedCompositeFieldContainer[ExtractionSchema]
    def __init__(self, schemas: _Optional[_Iterable[_Union[ExtractionSchema, _Mapping]]] = ...) -> None: ...

class ClassifyDocumentRequest(_message.Message):
    __slots__ = ("document_id", "text")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    text: str
    def __init__(self, document_id: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class TypeScore(_message.Message):
    __slots__ = ("type_name", "probability", "similarity")
    TYPE_NAME_FIELD_NUMBER: _ClassVar[int]
    PROBABILITY_FIELD_NUMBER: _ClassVar[int]
    SIMILARITY_FIELD_NUMBER: _ClassVar[int]
    type_name: str
    probability: float
    similarity: float
    def __init__(self, type_name: _Optional[str] = ..., probability: _Optional[float] = ..., similarity: _Optional[float] = ...) -> None: ...

class ChunkEvidence(_message.Message):
    __slots__ = ("chunk_id", "similarity", "page", "section")
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    SIMILARITY_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    SECTION_FIELD_NUMBER: _ClassVar[int]
    chunk_id: str
    similarity: float
    page: int
    section: str
    def __init__(self, chunk_id: _Optional[str] = ..., similarity: _Optional[float] = ..., page: _Optional[int] = ..., section: _Optional[str] = ...) -> None: ...

class Card(_message.Message):
    __slots__ = ("kind", "title", "markdown")
    KIND_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    MARKDOWN_FIELD_NUMBER: _ClassVar[int]
    kind: str
    title: str
    markdown: str
    def __init__(self, kind: _Optional[str] = ..., title: _Optional[str] = ..., markdown: _Optional[str] = ...) -> None: ...

class ClassifyDocumentResponse(_message.Message):
    __slots__ = ("type_name", "confidence", "alternatives", "evidence", "decided_by", "refused_llm_answer", "cost", "card")
    TYPE_NAME_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    ALTERNATIVES_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    REFUSED_LLM_ANSWER_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    CARD_FIELD_NUMBER: _ClassVar[int]
    type_name: str
    confidence: float
    alternatives: _containers.RepeatedCompositeFieldContainer[TypeScore]
    evidence: _containers.RepeatedCompositeFieldContainer[ChunkEvidence]
    decided_by: str
    refused_llm_answer: str
    cost: _common_pb2.Cost
    card: Card
    def __init__(self, type_name: _Optional[str] = ..., confidence: _Optional[float] = ..., alternatives: _Optional[_Iterable[_Union[TypeScore, _Mapping]]] = ..., evidence: _Optional[_Iterable[_Union[ChunkEvidence, _Mapping]]] = ..., decided_by: _Optional[str] = ..., refused_llm_answer: _Optional[str] = ..., cost: _Optional[_Union[_common_pb2.Cost, _Mapping]] = ..., card: _Optional[_Union[Card, _Mapping]] = ...) -> None: ...

class ExtractDocumentRequest(_message.Message):
    __slots__ = ("document_id", "schema_name", "schema_version")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_NAME_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    schema_name: str
    schema_version: int
    def __init__(self, document_id: _Optional[str] = ..., schema_name: _Optional[str] = ..., schema_version: _Optional[int] = ...) -> None: ...

class TableColumn(_message.Message):
    __slots__ = ("name", "type", "filled", "empty")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    FILLED_FIELD_NUMBER: _ClassVar[int]
    EMPTY_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: str
    filled: int
    empty: int
    def __init__(self, name: _Optional[str] = ..., type: _Optional[str] = ..., filled: _Optional[int] = ..., empty: _Optional[int] = ...) -> None: ...

class ExtractedTable(_message.Message):
    __slots__ = ("title", "columns", "rows_json", "row_count", "chunk_ids")
    TITLE_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    ROWS_JSON_FIELD_NUMBER: _ClassVar[int]
    ROW_COUNT_FIELD_NUMBER: _ClassVar[int]
    CHUNK_IDS_FIELD_NUMBER: _ClassVar[int]
    title: str
    columns: _containers.RepeatedCompositeFieldContainer[TableColumn]
    rows_json: _containers.RepeatedScalarFieldContainer[str]
    row_count: int
    chunk_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, title: _Optional[str] = ..., columns: _Optional[_Iterable[_Union[TableColumn, _Mapping]]] = ..., rows_json: _Optional[_Iterable[str]] = ..., row_count: _Optional[int] = ..., chunk_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ValueEvidence(_message.Message):
    __slots__ = ("chunk_id", "quote", "page", "section")
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    QUOTE_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    SECTION_FIELD_NUMBER: _ClassVar[int]
    chunk_id: str
    quote: str
    page: int
    section: str
    def __init__(self, chunk_id: _Optional[str] = ..., quote: _Optional[str] = ..., page: _Optional[int] = ..., section: _Optional[str] = ...) -> None: ...

class ExtractedField(_message.Message):
    __slots__ = ("name", "value_json", "evidence")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_JSON_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value_json: str
    evidence: ValueEvidence
    def __init__(self, name: _Optional[str] = ..., value_json: _Optional[str] = ..., evidence: _Optional[_Union[ValueEvidence, _Mapping]] = ...) -> None: ...

class DroppedValue(_message.Message):
    __slots__ = ("name", "why")
    NAME_FIELD_NUMBER: _ClassVar[int]
    WHY_FIELD_NUMBER: _ClassVar[int]
    name: str
    why: str
    def __init__(self, name: _Optional[str] = ..., why: _Optional[str] = ...) -> None: ...

class ExtractDocumentResponse(_message.Message):
    __slots__ = ("tables", "fields", "dropped", "schema_name", "schema_version", "attempts", "cost", "card")
    TABLES_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_NAME_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    CARD_FIELD_NUMBER: _ClassVar[int]
    tables: _containers.RepeatedCompositeFieldContainer[ExtractedTable]
    fields: _containers.RepeatedCompositeFieldContainer[ExtractedField]
    dropped: _containers.RepeatedCompositeFieldContainer[DroppedValue]
    schema_name: str
    schema_version: int
    attempts: int
    cost: _common_pb2.Cost
    card: Card
    def __init__(self, tables: _Optional[_Iterable[_Union[ExtractedTable, _Mapping]]] = ..., fields: _Optional[_Iterable[_Union[ExtractedField, _Mapping]]] = ..., dropped: _Optional[_Iterable[_Union[DroppedValue, _Mapping]]] = ..., schema_name: _Optional[str] = ..., schema_version: _Optional[int] = ..., attempts: _Optional[int] = ..., cost: _Optional[_Union[_common_pb2.Cost, _Mapping]] = ..., card: _Optional[_Union[Card, _Mapping]] = ...) -> None: ...

class ProcessDocumentRequest(_message.Message):
    __slots__ = ("document_id",)
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    def __init__(self, document_id: _Optional[str] = ...) -> None: ...

class ProcessingTimings(_message.Message):
    __slots__ = ("classify_ms", "taxonomy_ms", "extract_ms")
    CLASSIFY_MS_FIELD_NUMBER: _ClassVar[int]
    TAXONOMY_MS_FIELD_NUMBER: _ClassVar[int]
    EXTRACT_MS_FIELD_NUMBER: _ClassVar[int]
    classify_ms: int
    taxonomy_ms: int
    extract_ms: int
    def __init__(self, classify_ms: _Optional[int] = ..., taxonomy_ms: _Optional[int] = ..., extract_ms: _Optional[int] = ...) -> None: ...

class ProcessingResult(_message.Message):
    __slots__ = ("result_id", "document_id", "content_hash", "type_name", "confidence", "proposed_type", "schema_version", "fields", "dropped", "tables", "cost", "timings", "run_by", "model", "create_time", "notes")
    RESULT_ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    TYPE_NAME_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    PROPOSED_TYPE_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    TABLES_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    RUN_BY_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    NOTES_FIELD_NUMBER: _ClassVar[int]
    result_id: str
    document_id: str
    content_hash: str
    type_name: str
    confidence: float
    proposed_type: bool
    schema_version: int
    fields: _containers.RepeatedCompositeFieldContainer[ExtractedField]
    dropped: _containers.RepeatedCompositeFieldContainer[DroppedValue]
    tables: _containers.RepeatedCompositeFieldContainer[ExtractedTable]
    cost: _common_pb2.Cost
    timings: ProcessingTimings
    run_by: str
    model: str
    create_time: _timestamp_pb2.Timestamp
    notes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, result_id: _Optional[str] = ..., document_id: _Optional[str] = ..., content_hash: _Optional[str] = ..., type_name: _Optional[str] = ..., confidence: _Optional[float] = ..., proposed_type: _Optional[bool] = ..., schema_version: _Optional[int] = ..., fields: _Optional[_Iterable[_Union[ExtractedField, _Mapping]]] = ..., dropped: _Optional[_Iterable[_Union[DroppedValue, _Mapping]]] = ..., tables: _Optional[_Iterable[_Union[ExtractedTable, _Mapping]]] = ..., cost: _Optional[_Union[_common_pb2.Cost, _Mapping]] = ..., timings: _Optional[_Union[ProcessingTimings, _Mapping]] = ..., run_by: _Optional[str] = ..., model: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., notes: _Optional[_Iterable[str]] = ...) -> None: ...

class ProcessDocumentResponse(_message.Message):
    __slots__ = ("result", "existing")
    RESULT_FIELD_NUMBER: _ClassVar[int]
    EXISTING_FIELD_NUMBER: _ClassVar[int]
    result: ProcessingResult
    existing: bool
    def __init__(self, result: _Optional[_Union[ProcessingResult, _Mapping]] = ..., existing: _Optional[bool] = ...) -> None: ...

class ListProcessingResultsRequest(_message.Message):
    __slots__ = ("document_id", "page_size", "page_token")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    page_size: int
    page_token: str
    def __init__(self, document_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListProcessingResultsResponse(_message.Message):
    __slots__ = ("results", "next_page_token")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[ProcessingResult]
    next_page_token: str
    def __init__(self, results: _Optional[_Iterable[_Union[ProcessingResult, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...
