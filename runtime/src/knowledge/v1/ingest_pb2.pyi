import datetime

from google.api import annotations_pb2 as _annotations_pb2
from google.api import httpbody_pb2 as _httpbody_pb2
from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from knowledge.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DocumentState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DOCUMENT_STATE_UNSPECIFIED: _ClassVar[DocumentState]
    DOCUMENT_STATE_QUEUED: _ClassVar[DocumentState]
    DOCUMENT_STATE_EXTRACTING: _ClassVar[DocumentState]
    DOCUMENT_STATE_CHUNKING: _ClassVar[DocumentState]
    DOCUMENT_STATE_EMBEDDING: _ClassVar[DocumentState]
    DOCUMENT_STATE_STORING: _ClassVar[DocumentState]
    DOCUMENT_STATE_SEARCHABLE: _ClassVar[DocumentState]
    DOCUMENT_STATE_FAILED: _ClassVar[DocumentState]
    DOCUMENT_STATE_CANCELLED: _ClassVar[DocumentState]

class DocumentChangeKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DOCUMENT_CHANGE_KIND_UNSPECIFIED: _ClassVar[DocumentChangeKind]
    DOCUMENT_CHANGE_KIND_SNAPSHOT: _ClassVar[DocumentChangeKind]
    DOCUMENT_CHANGE_KIND_SYNCED: _ClassVar[DocumentChangeKind]
    DOCUMENT_CHANGE_KIND_CHANGED: _ClassVar[DocumentChangeKind]
    DOCUMENT_CHANGE_KIND_REMOVED: _ClassVar[DocumentChangeKind]

class WebhookState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WEBHOOK_STATE_UNSPECIFIED: _ClassVar[WebhookState]
    WEBHOOK_STATE_ACTIVE: _ClassVar[WebhookState]
    WEBHOOK_STATE_PAUSED: _ClassVar[WebhookState]
    WEBHOOK_STATE_DISABLED: _ClassVar[WebhookState]

class ModelChangeState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MODEL_CHANGE_STATE_UNSPECIFIED: _ClassVar[ModelChangeState]
    MODEL_CHANGE_STATE_RE_EMBEDDING: _ClassVar[ModelChangeState]
    MODEL_CHANGE_STATE_EVALUATING: _ClassVar[ModelChangeState]
    MODEL_CHANGE_STATE_HELD: _ClassVar[ModelChangeState]
    MODEL_CHANGE_STATE_SWAPPED: _ClassVar[ModelChangeState]
    MODEL_CHANGE_STATE_ROLLED_BACK: _ClassVar[ModelChangeState]
    MODEL_CHANGE_STATE_FINISHED: _ClassVar[ModelChangeState]
    MODEL_CHANGE_STATE_CANCELLED: _ClassVar[ModelChangeState]
DOCUMENT_STATE_UNSPECIFIED: DocumentState
DOCUMENT_STATE_QUEUED: DocumentState
DOCUMENT_STATE_EXTRACTING: DocumentState
DOCUMENT_STATE_CHUNKING: DocumentState
DOCUMENT_STATE_EMBEDDING: DocumentState
DOCUMENT_STATE_STORING: DocumentState
DOCUMENT_STATE_SEARCHABLE: DocumentState
DOCUMENT_STATE_FAILED: DocumentState
DOCUMENT_STATE_CANCELLED: DocumentState
DOCUMENT_CHANGE_KIND_UNSPECIFIED: DocumentChangeKind
DOCUMENT_CHANGE_KIND_SNAPSHOT: DocumentChangeKind
DOCUMENT_CHANGE_KIND_SYNCED: DocumentChangeKind
DOCUMENT_CHANGE_KIND_CHANGED: DocumentChangeKind
DOCUMENT_CHANGE_KIND_REMOVED: DocumentChangeKind
WEBHOOK_STATE_UNSPECIFIED: WebhookState
WEBHOOK_STATE_ACTIVE: WebhookState
WEBHOOK_STATE_PAUSED: WebhookState
WEBHOOK_STATE_DISABLED: WebhookState
MODEL_CHANGE_STATE_UNSPECIFIED: ModelChangeState
MODEL_CHANGE_STATE_RE_EMBEDDING: ModelChangeState
MODEL_CHANGE_STATE_EVALUATING: ModelChangeState
MODEL_CHANGE_STATE_HELD: ModelChangeState
MODEL_CHANGE_STATE_SWAPPED: ModelChangeState
MODEL_CHANGE_STATE_ROLLED_BACK: ModelChangeState
MODEL_CHANGE_STATE_FINISHED: ModelChangeState
MODEL_CHANGE_STATE_CANCELLED: ModelChangeState

class Corpus(_message.Message):
    __slots__ = ("corpus_id", "name", "description", "document_count", "chunk_count", "create_time", "scope", "confidentiality", "key", "default_principals")
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    CHUNK_COUNT_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    CONFIDENTIALITY_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_PRINCIPALS_FIELD_NUMBER: _ClassVar[int]
    corpus_id: str
    name: str
    description: str
    document_count: int
    chunk_count: int
    create_time: _timestamp_pb2.Timestamp
    scope: str
    confidentiality: str
    key: str
    default_principals: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, corpus_id: _Optional[str] = ..., name: _Optional[str] = ..., description: _Optional[str] = ..., document_count: _Optional[int] = ..., chunk_count: _Optional[int] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., scope: _Optional[str] = ..., confidentiality: _Optional[str] = ..., key: _Optional[str] = ..., default_principals: _Optional[_Iterable[str]] = ...) -> None: ...

class CreateCorpusRequest(_message.Message):
    __slots__ = ("name", "description", "confidentiality", "platform_wide", "key", "default_principals")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CONFIDENTIALITY_FIELD_NUMBER: _ClassVar[int]
    PLATFORM_WIDE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_PRINCIPALS_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    confidentiality: str
    platform_wide: bool
    key: str
    default_principals: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., confidentiality: _Optional[str] = ..., platform_wide: _Optional[bool] = ..., key: _Optional[str] = ..., default_principals: _Optional[_Iterable[str]] = ...) -> None: ...

class SetCorpusDefaultAccessRequest(_message.Message):
    __slots__ = ("corpus_id", "default_principals")
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_PRINCIPALS_FIELD_NUMBER: _ClassVar[int]
    corpus_id: str
    default_principals: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, corpus_id: _Optional[str] = ..., default_principals: _Optional[_Iterable[str]] = ...) -> None: ...

class SetCorpusDefaultAccessResponse(_message.Message):
    __slots__ = ("corpus",)
    CORPUS_FIELD_NUMBER: _ClassVar[int]
    corpus: Corpus
    def __init__(self, corpus: _Optional[_Union[Corpus, _Mapping]] = ...) -> None: ...

class AccessList(_message.Message):
    __slots__ = ("principals",)
    PRINCIPALS_FIELD_NUMBER: _ClassVar[int]
    principals: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, principals: _Optional[_Iterable[str]] = ...) -> None: ...

class ListCorporaRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListCorporaResponse(_message.Message):
    __slots__ = ("corpora", "next_page_token")
    CORPORA_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    corpora: _containers.RepeatedCompositeFieldContainer[Corpus]
    next_page_token: str
    def __init__(self, corpora: _Optional[_Iterable[_Union[Corpus, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class Document(_message.Message):
    __slots__ = ("document_id", "corpus_id", "filename", "state", "error", "chunk_count", "size_bytes", "mime_type", "extractable", "source_url", "job_id", "create_time", "update_time", "warnings", "extractor", "ocr_page_count", "ocr_confidence", "stage", "progress", "refusal_reason", "metadata", "document_ref", "principals")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CHUNK_COUNT_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    EXTRACTABLE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_URL_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    EXTRACTOR_FIELD_NUMBER: _ClassVar[int]
    OCR_PAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    OCR_CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    REFUSAL_REASON_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_REF_FIELD_NUMBER: _ClassVar[int]
    PRINCIPALS_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    corpus_id: str
    filename: str
    state: DocumentState
    error: str
    chunk_count: int
    size_bytes: int
    mime_type: str
    extractable: bool
    source_url: str
    job_id: str
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    warnings: _containers.RepeatedScalarFieldContainer[str]
    extractor: str
    ocr_page_count: int
    ocr_confidence: float
    stage: str
    progress: float
    refusal_reason: str
    metadata: _struct_pb2.Struct
    document_ref: str
    principals: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, document_id: _Optional[str] = ..., corpus_id: _Optional[str] = ..., filename: _Optional[str] = ..., state: _Optional[_Union[DocumentState, str]] = ..., error: _Optional[str] = ..., chunk_count: _Optional[int] = ..., size_bytes: _Optional[int] = ..., mime_type: _Optional[str] = ..., extractable: _Optional[bool] = ..., source_url: _Optional[str] = ..., job_id: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., warnings: _Optional[_Iterable[str]] = ..., extractor: _Optional[str] = ..., ocr_page_count: _Optional[int] = ..., ocr_confidence: _Optional[float] = ..., stage: _Optional[str] = ..., progress: _Optional[float] = ..., refusal_reason: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., document_ref: _Optional[str] = ..., principals: _Optional[_Iterable[str]] = ...) -> None: ...

class SetDocumentAccessRequest(_message.Message):
    __slots__ = ("document_id", "principals")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    PRINCIPALS_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    principals: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, document_id: _Optional[str] = ..., principals: _Optional[_Iterable[str]] = ...) -> None: ...

class SetDocumentAccessResponse(_message.Message):
    __slots__ = ("document", "previous_principals")
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_PRINCIPALS_FIELD_NUMBER: _ClassVar[int]
    document: Document
    previous_principals: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, document: _Optional[_Union[Document, _Mapping]] = ..., previous_principals: _Optional[_Iterable[str]] = ...) -> None: ...

class UpdateDocumentRequest(_message.Message):
    __slots__ = ("document_id", "document", "update_mask")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    document: Document
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, document_id: _Optional[str] = ..., document: _Optional[_Union[Document, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

class UpdateDocumentResponse(_message.Message):
    __slots__ = ("document",)
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    document: Document
    def __init__(self, document: _Optional[_Union[Document, _Mapping]] = ...) -> None: ...

class ListDocumentsRequest(_message.Message):
    __slots__ = ("corpus_id", "page_size", "page_token", "corpus_key", "filter")
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    CORPUS_KEY_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    corpus_id: str
    page_size: int
    page_token: str
    corpus_key: str
    filter: str
    def __init__(self, corpus_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., corpus_key: _Optional[str] = ..., filter: _Optional[str] = ...) -> None: ...

class ListDocumentsResponse(_message.Message):
    __slots__ = ("documents", "next_page_token")
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    documents: _containers.RepeatedCompositeFieldContainer[Document]
    next_page_token: str
    def __init__(self, documents: _Optional[_Iterable[_Union[Document, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetDocumentRequest(_message.Message):
    __slots__ = ("document_id",)
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    def __init__(self, document_id: _Optional[str] = ...) -> None: ...

class MoveDocumentsRequest(_message.Message):
    __slots__ = ("target_corpus_id", "document_ids", "source_corpus_id", "all_documents")
    TARGET_CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_IDS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    ALL_DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    target_corpus_id: str
    document_ids: _containers.RepeatedScalarFieldContainer[str]
    source_corpus_id: str
    all_documents: bool
    def __init__(self, target_corpus_id: _Optional[str] = ..., document_ids: _Optional[_Iterable[str]] = ..., source_corpus_id: _Optional[str] = ..., all_documents: _Optional[bool] = ...) -> None: ...

class MoveDocumentsResponse(_message.Message):
    __slots__ = ("moved_count", "moved_document_ids")
    MOVED_COUNT_FIELD_NUMBER: _ClassVar[int]
    MOVED_DOCUMENT_IDS_FIELD_NUMBER: _ClassVar[int]
    moved_count: int
    moved_document_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, moved_count: _Optional[int] = ..., moved_document_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class DeleteDocumentRequest(_message.Message):
    __slots__ = ("document_id", "reason")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    reason: str
    def __init__(self, document_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class DeleteDocumentResponse(_message.Message):
    __slots__ = ("document_id", "deleted_chunk_count", "cancelled_job_id", "tombstone")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    DELETED_CHUNK_COUNT_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TOMBSTONE_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    deleted_chunk_count: int
    cancelled_job_id: str
    tombstone: Tombstone
    def __init__(self, document_id: _Optional[str] = ..., deleted_chunk_count: _Optional[int] = ..., cancelled_job_id: _Optional[str] = ..., tombstone: _Optional[_Union[Tombstone, _Mapping]] = ...) -> None: ...

class GetDocumentTextRequest(_message.Message):
    __slots__ = ("document_id", "page")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    page: int
    def __init__(self, document_id: _Optional[str] = ..., page: _Optional[int] = ...) -> None: ...

class GetDocumentTextResponse(_message.Message):
    __slots__ = ("document_id", "text", "page", "page_count", "next_page", "previous_page", "source_url", "extractor")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    PAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_PAGE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_URL_FIELD_NUMBER: _ClassVar[int]
    EXTRACTOR_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    text: str
    page: int
    page_count: int
    next_page: int
    previous_page: int
    source_url: str
    extractor: str
    def __init__(self, document_id: _Optional[str] = ..., text: _Optional[str] = ..., page: _Optional[int] = ..., page_count: _Optional[int] = ..., next_page: _Optional[int] = ..., previous_page: _Optional[int] = ..., source_url: _Optional[str] = ..., extractor: _Optional[str] = ...) -> None: ...

class UploadDocumentRequest(_message.Message):
    __slots__ = ("corpus_id", "filename", "http_body", "metadata", "access")
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    HTTP_BODY_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ACCESS_FIELD_NUMBER: _ClassVar[int]
    corpus_id: str
    filename: str
    http_body: _httpbody_pb2.HttpBody
    metadata: _struct_pb2.Struct
    access: AccessList
    def __init__(self, corpus_id: _Optional[str] = ..., filename: _Optional[str] = ..., http_body: _Optional[_Union[_httpbody_pb2.HttpBody, _Mapping]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., access: _Optional[_Union[AccessList, _Mapping]] = ...) -> None: ...

class UploadDocumentResponse(_message.Message):
    __slots__ = ("job_id", "filename", "status", "corpus_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    filename: str
    status: str
    corpus_id: str
    def __init__(self, job_id: _Optional[str] = ..., filename: _Optional[str] = ..., status: _Optional[str] = ..., corpus_id: _Optional[str] = ...) -> None: ...

class GetIngestJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class IngestJob(_message.Message):
    __slots__ = ("job_id", "state", "progress", "stage", "error", "result", "corpus_id", "filename", "attempt", "create_time", "update_time", "interruptions")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    INTERRUPTIONS_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    state: DocumentState
    progress: float
    stage: str
    error: str
    result: IngestResult
    corpus_id: str
    filename: str
    attempt: int
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    interruptions: int
    def __init__(self, job_id: _Optional[str] = ..., state: _Optional[_Union[DocumentState, str]] = ..., progress: _Optional[float] = ..., stage: _Optional[str] = ..., error: _Optional[str] = ..., result: _Optional[_Union[IngestResult, _Mapping]] = ..., corpus_id: _Optional[str] = ..., filename: _Optional[str] = ..., attempt: _Optional[int] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., interruptions: _Optional[int] = ...) -> None: ...

class IngestResult(_message.Message):
    __slots__ = ("document_id", "chunk_count", "message", "duplicate", "re_extracted", "extractable", "warnings")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    CHUNK_COUNT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    RE_EXTRACTED_FIELD_NUMBER: _ClassVar[int]
    EXTRACTABLE_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    chunk_count: int
    message: str
    duplicate: bool
    re_extracted: bool
    extractable: bool
    warnings: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, document_id: _Optional[str] = ..., chunk_count: _Optional[int] = ..., message: _Optional[str] = ..., duplicate: _Optional[bool] = ..., re_extracted: _Optional[bool] = ..., extractable: _Optional[bool] = ..., warnings: _Optional[_Iterable[str]] = ...) -> None: ...

class CancelIngestJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class CancelIngestJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: IngestJob
    def __init__(self, job: _Optional[_Union[IngestJob, _Mapping]] = ...) -> None: ...

class RetryIngestJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class RetryIngestJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: IngestJob
    def __init__(self, job: _Optional[_Union[IngestJob, _Mapping]] = ...) -> None: ...

class IngestTextRequest(_message.Message):
    __slots__ = ("corpus_id", "text", "title", "source_url", "document_id", "system_corpus", "about_subject", "metadata", "access")
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_URL_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_CORPUS_FIELD_NUMBER: _ClassVar[int]
    ABOUT_SUBJECT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ACCESS_FIELD_NUMBER: _ClassVar[int]
    corpus_id: str
    text: str
    title: str
    source_url: str
    document_id: str
    system_corpus: str
    about_subject: str
    metadata: _struct_pb2.Struct
    access: AccessList
    def __init__(self, corpus_id: _Optional[str] = ..., text: _Optional[str] = ..., title: _Optional[str] = ..., source_url: _Optional[str] = ..., document_id: _Optional[str] = ..., system_corpus: _Optional[str] = ..., about_subject: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., access: _Optional[_Union[AccessList, _Mapping]] = ...) -> None: ...

class IngestTextResponse(_message.Message):
    __slots__ = ("job_id", "filename", "status", "corpus_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    filename: str
    status: str
    corpus_id: str
    def __init__(self, job_id: _Optional[str] = ..., filename: _Optional[str] = ..., status: _Optional[str] = ..., corpus_id: _Optional[str] = ...) -> None: ...

class IngestTextsRequest(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[IngestTextRequest]
    def __init__(self, items: _Optional[_Iterable[_Union[IngestTextRequest, _Mapping]]] = ...) -> None: ...

class IngestTextsResponse(_message.Message):
    __slots__ = ("items", "accepted_count", "rejected_count")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_COUNT_FIELD_NUMBER: _ClassVar[int]
    REJECTED_COUNT_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[IngestTextsItem]
    accepted_count: int
    rejected_count: int
    def __init__(self, items: _Optional[_Iterable[_Union[IngestTextsItem, _Mapping]]] = ..., accepted_count: _Optional[int] = ..., rejected_count: _Optional[int] = ...) -> None: ...

class BatchIngestTextsRequest(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[IngestTextRequest]
    def __init__(self, items: _Optional[_Iterable[_Union[IngestTextRequest, _Mapping]]] = ...) -> None: ...

class BatchIngestTextsResponse(_message.Message):
    __slots__ = ("items", "accepted_count", "rejected_count")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_COUNT_FIELD_NUMBER: _ClassVar[int]
    REJECTED_COUNT_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[IngestTextsItem]
    accepted_count: int
    rejected_count: int
    def __init__(self, items: _Optional[_Iterable[_Union[IngestTextsItem, _Mapping]]] = ..., accepted_count: _Optional[int] = ..., rejected_count: _Optional[int] = ...) -> None: ...

class IngestTextsItem(_message.Message):
    __slots__ = ("index", "job", "error_reason", "error", "error_code")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    ERROR_REASON_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    index: int
    job: IngestTextResponse
    error_reason: str
    error: str
    error_code: str
    def __init__(self, index: _Optional[int] = ..., job: _Optional[_Union[IngestTextResponse, _Mapping]] = ..., error_reason: _Optional[str] = ..., error: _Optional[str] = ..., error_code: _Optional[str] = ...) -> None: ...

class IngestUrlRequest(_message.Message):
    __slots__ = ("url", "corpus_id")
    URL_FIELD_NUMBER: _ClassVar[int]
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    url: str
    corpus_id: str
    def __init__(self, url: _Optional[str] = ..., corpus_id: _Optional[str] = ...) -> None: ...

class IngestUrlResponse(_message.Message):
    __slots__ = ("job_id", "filename", "status", "corpus_id", "source_url")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_URL_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    filename: str
    status: str
    corpus_id: str
    source_url: str
    def __init__(self, job_id: _Optional[str] = ..., filename: _Optional[str] = ..., status: _Optional[str] = ..., corpus_id: _Optional[str] = ..., source_url: _Optional[str] = ...) -> None: ...

class GetPromptContextRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetPromptContextResponse(_message.Message):
    __slots__ = ("text", "document_count", "corpus_count")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    CORPUS_COUNT_FIELD_NUMBER: _ClassVar[int]
    text: str
    document_count: int
    corpus_count: int
    def __init__(self, text: _Optional[str] = ..., document_count: _Optional[int] = ..., corpus_count: _Optional[int] = ...) -> None: ...

class BindCorpusRequest(_message.Message):
    __slots__ = ("corpus_id", "scope")
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    corpus_id: str
    scope: str
    def __init__(self, corpus_id: _Optional[str] = ..., scope: _Optional[str] = ...) -> None: ...

class BindCorpusResponse(_message.Message):
    __slots__ = ("corpus",)
    CORPUS_FIELD_NUMBER: _ClassVar[int]
    corpus: Corpus
    def __init__(self, corpus: _Optional[_Union[Corpus, _Mapping]] = ...) -> None: ...

class ImportPathRequest(_message.Message):
    __slots__ = ("corpus_id", "paths")
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    PATHS_FIELD_NUMBER: _ClassVar[int]
    corpus_id: str
    paths: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, corpus_id: _Optional[str] = ..., paths: _Optional[_Iterable[str]] = ...) -> None: ...

class ImportPathResponse(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[ImportPathItem]
    def __init__(self, items: _Optional[_Iterable[_Union[ImportPathItem, _Mapping]]] = ...) -> None: ...

class ImportPathItem(_message.Message):
    __slots__ = ("resolved_path", "job")
    RESOLVED_PATH_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    resolved_path: str
    job: UploadDocumentResponse
    def __init__(self, resolved_path: _Optional[str] = ..., job: _Optional[_Union[UploadDocumentResponse, _Mapping]] = ...) -> None: ...

class ListImportRootsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListImportRootsResponse(_message.Message):
    __slots__ = ("roots",)
    ROOTS_FIELD_NUMBER: _ClassVar[int]
    roots: _containers.RepeatedCompositeFieldContainer[ImportRootInfo]
    def __init__(self, roots: _Optional[_Iterable[_Union[ImportRootInfo, _Mapping]]] = ...) -> None: ...

class ImportRootInfo(_message.Message):
    __slots__ = ("name", "path")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    name: str
    path: str
    def __init__(self, name: _Optional[str] = ..., path: _Optional[str] = ...) -> None: ...

class SetImportBindingRequest(_message.Message):
    __slots__ = ("corpus_id", "root", "mode")
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    ROOT_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    corpus_id: str
    root: str
    mode: str
    def __init__(self, corpus_id: _Optional[str] = ..., root: _Optional[str] = ..., mode: _Optional[str] = ...) -> None: ...

class ImportBinding(_message.Message):
    __slots__ = ("corpus_id", "root", "mode", "set_by", "update_time", "last_scan_time")
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    ROOT_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    SET_BY_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_SCAN_TIME_FIELD_NUMBER: _ClassVar[int]
    corpus_id: str
    root: str
    mode: str
    set_by: str
    update_time: _timestamp_pb2.Timestamp
    last_scan_time: _timestamp_pb2.Timestamp
    def __init__(self, corpus_id: _Optional[str] = ..., root: _Optional[str] = ..., mode: _Optional[str] = ..., set_by: _Optional[str] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_scan_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListImportBindingsRequest(_message.Message):
    __slots__ = ("corpus_id",)
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    corpus_id: str
    def __init__(self, corpus_id: _Optional[str] = ...) -> None: ...

class ListImportBindingsResponse(_message.Message):
    __slots__ = ("bindings",)
    BINDINGS_FIELD_NUMBER: _ClassVar[int]
    bindings: _containers.RepeatedCompositeFieldContainer[ImportBinding]
    def __init__(self, bindings: _Optional[_Iterable[_Union[ImportBinding, _Mapping]]] = ...) -> None: ...

class ScanImportsRequest(_message.Message):
    __slots__ = ("corpus_id",)
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    corpus_id: str
    def __init__(self, corpus_id: _Optional[str] = ...) -> None: ...

class ScanImportsResponse(_message.Message):
    __slots__ = ("roots", "files_seen", "findings_recorded", "jobs_started", "errors")
    ROOTS_FIELD_NUMBER: _ClassVar[int]
    FILES_SEEN_FIELD_NUMBER: _ClassVar[int]
    FINDINGS_RECORDED_FIELD_NUMBER: _ClassVar[int]
    JOBS_STARTED_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    roots: int
    files_seen: int
    findings_recorded: int
    jobs_started: int
    errors: int
    def __init__(self, roots: _Optional[int] = ..., files_seen: _Optional[int] = ..., findings_recorded: _Optional[int] = ..., jobs_started: _Optional[int] = ..., errors: _Optional[int] = ...) -> None: ...

class ListImportFindingsRequest(_message.Message):
    __slots__ = ("corpus_id", "state", "page_size", "page_token")
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    corpus_id: str
    state: str
    page_size: int
    page_token: str
    def __init__(self, corpus_id: _Optional[str] = ..., state: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListImportFindingsResponse(_message.Message):
    __slots__ = ("findings", "next_page_token")
    FINDINGS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    findings: _containers.RepeatedCompositeFieldContainer[ImportFinding]
    next_page_token: str
    def __init__(self, findings: _Optional[_Iterable[_Union[ImportFinding, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ImportFinding(_message.Message):
    __slots__ = ("finding_id", "corpus_id", "root", "path", "content_hash", "size_bytes", "kind", "state", "job_id", "decided_by", "decide_time", "create_time")
    FINDING_ID_FIELD_NUMBER: _ClassVar[int]
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    ROOT_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    DECIDE_TIME_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    finding_id: str
    corpus_id: str
    root: str
    path: str
    content_hash: str
    size_bytes: int
    kind: str
    state: str
    job_id: str
    decided_by: str
    decide_time: _timestamp_pb2.Timestamp
    create_time: _timestamp_pb2.Timestamp
    def __init__(self, finding_id: _Optional[str] = ..., corpus_id: _Optional[str] = ..., root: _Optional[str] = ..., path: _Optional[str] = ..., content_hash: _Optional[str] = ..., size_bytes: _Optional[int] = ..., kind: _Optional[str] = ..., state: _Optional[str] = ..., job_id: _Optional[str] = ..., decided_by: _Optional[str] = ..., decide_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class AcceptImportFindingRequest(_message.Message):
    __slots__ = ("finding_id",)
    FINDING_ID_FIELD_NUMBER: _ClassVar[int]
    finding_id: str
    def __init__(self, finding_id: _Optional[str] = ...) -> None: ...

class AcceptImportFindingResponse(_message.Message):
    __slots__ = ("finding", "job")
    FINDING_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    finding: ImportFinding
    job: UploadDocumentResponse
    def __init__(self, finding: _Optional[_Union[ImportFinding, _Mapping]] = ..., job: _Optional[_Union[UploadDocumentResponse, _Mapping]] = ...) -> None: ...

class DismissImportFindingRequest(_message.Message):
    __slots__ = ("finding_id",)
    FINDING_ID_FIELD_NUMBER: _ClassVar[int]
    finding_id: str
    def __init__(self, finding_id: _Optional[str] = ...) -> None: ...

class TenantQuotas(_message.Message):
    __slots__ = ("max_documents", "max_bytes", "max_chunks", "max_embedding_tokens_per_month", "max_llm_cost_per_month")
    MAX_DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_CHUNKS_FIELD_NUMBER: _ClassVar[int]
    MAX_EMBEDDING_TOKENS_PER_MONTH_FIELD_NUMBER: _ClassVar[int]
    MAX_LLM_COST_PER_MONTH_FIELD_NUMBER: _ClassVar[int]
    max_documents: int
    max_bytes: int
    max_chunks: int
    max_embedding_tokens_per_month: int
    max_llm_cost_per_month: float
    def __init__(self, max_documents: _Optional[int] = ..., max_bytes: _Optional[int] = ..., max_chunks: _Optional[int] = ..., max_embedding_tokens_per_month: _Optional[int] = ..., max_llm_cost_per_month: _Optional[float] = ...) -> None: ...

class GetTenantSettingsRequest(_message.Message):
    __slots__ = ("tenant",)
    TENANT_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    def __init__(self, tenant: _Optional[str] = ...) -> None: ...

class UpdateTenantSettingsRequest(_message.Message):
    __slots__ = ("tenant", "enabled", "quotas", "features")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    QUOTAS_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    enabled: bool
    quotas: TenantQuotas
    features: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tenant: _Optional[str] = ..., enabled: _Optional[bool] = ..., quotas: _Optional[_Union[TenantQuotas, _Mapping]] = ..., features: _Optional[_Iterable[str]] = ...) -> None: ...

class UpdateTenantSettingsResponse(_message.Message):
    __slots__ = ("settings",)
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    settings: TenantSettings
    def __init__(self, settings: _Optional[_Union[TenantSettings, _Mapping]] = ...) -> None: ...

class TenantSettings(_message.Message):
    __slots__ = ("tenant", "enabled", "quotas", "configured", "update_time", "updated_by", "features")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    QUOTAS_FIELD_NUMBER: _ClassVar[int]
    CONFIGURED_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATED_BY_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    enabled: bool
    quotas: TenantQuotas
    configured: bool
    update_time: _timestamp_pb2.Timestamp
    updated_by: str
    features: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tenant: _Optional[str] = ..., enabled: _Optional[bool] = ..., quotas: _Optional[_Union[TenantQuotas, _Mapping]] = ..., configured: _Optional[bool] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_by: _Optional[str] = ..., features: _Optional[_Iterable[str]] = ...) -> None: ...

class GetUsageRequest(_message.Message):
    __slots__ = ("period",)
    PERIOD_FIELD_NUMBER: _ClassVar[int]
    period: str
    def __init__(self, period: _Optional[str] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ("period", "document_count", "stored_bytes", "chunk_count", "embedding_tokens", "embedding_cost", "llm_tokens", "llm_cost", "quotas", "scope")
    PERIOD_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    STORED_BYTES_FIELD_NUMBER: _ClassVar[int]
    CHUNK_COUNT_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_TOKENS_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_COST_FIELD_NUMBER: _ClassVar[int]
    LLM_TOKENS_FIELD_NUMBER: _ClassVar[int]
    LLM_COST_FIELD_NUMBER: _ClassVar[int]
    QUOTAS_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    period: str
    document_count: int
    stored_bytes: int
    chunk_count: int
    embedding_tokens: int
    embedding_cost: float
    llm_tokens: int
    llm_cost: float
    quotas: TenantQuotas
    scope: str
    def __init__(self, period: _Optional[str] = ..., document_count: _Optional[int] = ..., stored_bytes: _Optional[int] = ..., chunk_count: _Optional[int] = ..., embedding_tokens: _Optional[int] = ..., embedding_cost: _Optional[float] = ..., llm_tokens: _Optional[int] = ..., llm_cost: _Optional[float] = ..., quotas: _Optional[_Union[TenantQuotas, _Mapping]] = ..., scope: _Optional[str] = ...) -> None: ...

class WatchDocumentsRequest(_message.Message):
    __slots__ = ("corpus_id", "corpus_key", "filter")
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    CORPUS_KEY_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    corpus_id: str
    corpus_key: str
    filter: str
    def __init__(self, corpus_id: _Optional[str] = ..., corpus_key: _Optional[str] = ..., filter: _Optional[str] = ...) -> None: ...

class DocumentChange(_message.Message):
    __slots__ = ("kind", "document_id", "document")
    KIND_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    kind: DocumentChangeKind
    document_id: str
    document: Document
    def __init__(self, kind: _Optional[_Union[DocumentChangeKind, str]] = ..., document_id: _Optional[str] = ..., document: _Optional[_Union[Document, _Mapping]] = ...) -> None: ...

class BatchGetDocumentsRequest(_message.Message):
    __slots__ = ("document_ids",)
    DOCUMENT_IDS_FIELD_NUMBER: _ClassVar[int]
    document_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, document_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class BatchGetDocumentsResponse(_message.Message):
    __slots__ = ("documents", "not_found_ids")
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    NOT_FOUND_IDS_FIELD_NUMBER: _ClassVar[int]
    documents: _containers.RepeatedCompositeFieldContainer[Document]
    not_found_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, documents: _Optional[_Iterable[_Union[Document, _Mapping]]] = ..., not_found_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class WatchEventsRequest(_message.Message):
    __slots__ = ("after",)
    AFTER_FIELD_NUMBER: _ClassVar[int]
    after: str
    def __init__(self, after: _Optional[str] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("event_id", "cursor", "type", "document_id", "corpus_id", "time", "chunk_count", "warnings", "reason", "from_corpus_id", "webhook_id", "principals", "model_change")
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    CHUNK_COUNT_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    FROM_CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    WEBHOOK_ID_FIELD_NUMBER: _ClassVar[int]
    PRINCIPALS_FIELD_NUMBER: _ClassVar[int]
    MODEL_CHANGE_FIELD_NUMBER: _ClassVar[int]
    event_id: str
    cursor: str
    type: str
    document_id: str
    corpus_id: str
    time: _timestamp_pb2.Timestamp
    chunk_count: int
    warnings: _containers.RepeatedScalarFieldContainer[str]
    reason: str
    from_corpus_id: str
    webhook_id: str
    principals: _containers.RepeatedScalarFieldContainer[str]
    model_change: ModelChange
    def __init__(self, event_id: _Optional[str] = ..., cursor: _Optional[str] = ..., type: _Optional[str] = ..., document_id: _Optional[str] = ..., corpus_id: _Optional[str] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., chunk_count: _Optional[int] = ..., warnings: _Optional[_Iterable[str]] = ..., reason: _Optional[str] = ..., from_corpus_id: _Optional[str] = ..., webhook_id: _Optional[str] = ..., principals: _Optional[_Iterable[str]] = ..., model_change: _Optional[_Union[ModelChange, _Mapping]] = ...) -> None: ...

class Tombstone(_message.Message):
    __slots__ = ("tombstone_id", "document_id", "corpus_id", "filename", "content_hash", "chunk_count", "deleted_by", "reason", "delete_time", "removal_state", "remove_time")
    TOMBSTONE_ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    CHUNK_COUNT_FIELD_NUMBER: _ClassVar[int]
    DELETED_BY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    DELETE_TIME_FIELD_NUMBER: _ClassVar[int]
    REMOVAL_STATE_FIELD_NUMBER: _ClassVar[int]
    REMOVE_TIME_FIELD_NUMBER: _ClassVar[int]
    tombstone_id: str
    document_id: str
    corpus_id: str
    filename: str
    content_hash: str
    chunk_count: int
    deleted_by: str
    reason: str
    delete_time: _timestamp_pb2.Timestamp
    removal_state: str
    remove_time: _timestamp_pb2.Timestamp
    def __init__(self, tombstone_id: _Optional[str] = ..., document_id: _Optional[str] = ..., corpus_id: _Optional[str] = ..., filename: _Optional[str] = ..., content_hash: _Optional[str] = ..., chunk_count: _Optional[int] = ..., deleted_by: _Optional[str] = ..., reason: _Optional[str] = ..., delete_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., removal_state: _Optional[str] = ..., remove_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListTombstonesRequest(_message.Message):
    __slots__ = ("corpus_id", "page_size", "page_token")
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    corpus_id: str
    page_size: int
    page_token: str
    def __init__(self, corpus_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListTombstonesResponse(_message.Message):
    __slots__ = ("tombstones", "next_page_token")
    TOMBSTONES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tombstones: _containers.RepeatedCompositeFieldContainer[Tombstone]
    next_page_token: str
    def __init__(self, tombstones: _Optional[_Iterable[_Union[Tombstone, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class DeleteCorpusRequest(_message.Message):
    __slots__ = ("corpus_id", "delete_documents")
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    DELETE_DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    corpus_id: str
    delete_documents: bool
    def __init__(self, corpus_id: _Optional[str] = ..., delete_documents: _Optional[bool] = ...) -> None: ...

class DeleteCorpusResponse(_message.Message):
    __slots__ = ("corpus_id", "deleted_document_count", "tombstones")
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    DELETED_DOCUMENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    TOMBSTONES_FIELD_NUMBER: _ClassVar[int]
    corpus_id: str
    deleted_document_count: int
    tombstones: _containers.RepeatedCompositeFieldContainer[Tombstone]
    def __init__(self, corpus_id: _Optional[str] = ..., deleted_document_count: _Optional[int] = ..., tombstones: _Optional[_Iterable[_Union[Tombstone, _Mapping]]] = ...) -> None: ...

class Passage(_message.Message):
    __slots__ = ("fragment", "text", "metadata")
    FRAGMENT_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    fragment: str
    text: str
    metadata: _struct_pb2.Struct
    def __init__(self, fragment: _Optional[str] = ..., text: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class IndexPassagesRequest(_message.Message):
    __slots__ = ("corpus_id", "corpus_key", "document_ref", "content_sha256", "title", "metadata", "passages", "confidentiality", "access")
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    CORPUS_KEY_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_REF_FIELD_NUMBER: _ClassVar[int]
    CONTENT_SHA256_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    PASSAGES_FIELD_NUMBER: _ClassVar[int]
    CONFIDENTIALITY_FIELD_NUMBER: _ClassVar[int]
    ACCESS_FIELD_NUMBER: _ClassVar[int]
    corpus_id: str
    corpus_key: str
    document_ref: str
    content_sha256: str
    title: str
    metadata: _struct_pb2.Struct
    passages: _containers.RepeatedCompositeFieldContainer[Passage]
    confidentiality: str
    access: AccessList
    def __init__(self, corpus_id: _Optional[str] = ..., corpus_key: _Optional[str] = ..., document_ref: _Optional[str] = ..., content_sha256: _Optional[str] = ..., title: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., passages: _Optional[_Iterable[_Union[Passage, _Mapping]]] = ..., confidentiality: _Optional[str] = ..., access: _Optional[_Union[AccessList, _Mapping]] = ...) -> None: ...

class IndexPassagesResponse(_message.Message):
    __slots__ = ("job_id", "state", "document_id", "unchanged", "corpus_id", "corpus_created")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    UNCHANGED_FIELD_NUMBER: _ClassVar[int]
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    CORPUS_CREATED_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    state: DocumentState
    document_id: str
    unchanged: bool
    corpus_id: str
    corpus_created: bool
    def __init__(self, job_id: _Optional[str] = ..., state: _Optional[_Union[DocumentState, str]] = ..., document_id: _Optional[str] = ..., unchanged: _Optional[bool] = ..., corpus_id: _Optional[str] = ..., corpus_created: _Optional[bool] = ...) -> None: ...

class RemoveByReferenceRequest(_message.Message):
    __slots__ = ("corpus_id", "corpus_key", "document_ref")
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    CORPUS_KEY_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_REF_FIELD_NUMBER: _ClassVar[int]
    corpus_id: str
    corpus_key: str
    document_ref: str
    def __init__(self, corpus_id: _Optional[str] = ..., corpus_key: _Optional[str] = ..., document_ref: _Optional[str] = ...) -> None: ...

class RemoveByReferenceResponse(_message.Message):
    __slots__ = ("removed", "tombstone", "cancelled_job_id")
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    TOMBSTONE_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    removed: int
    tombstone: Tombstone
    cancelled_job_id: str
    def __init__(self, removed: _Optional[int] = ..., tombstone: _Optional[_Union[Tombstone, _Mapping]] = ..., cancelled_job_id: _Optional[str] = ...) -> None: ...

class CheckIndexingRequest(_message.Message):
    __slots__ = ("corpus_id", "corpus_key", "bytes", "passages", "document_ref")
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    CORPUS_KEY_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    PASSAGES_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_REF_FIELD_NUMBER: _ClassVar[int]
    corpus_id: str
    corpus_key: str
    bytes: int
    passages: int
    document_ref: str
    def __init__(self, corpus_id: _Optional[str] = ..., corpus_key: _Optional[str] = ..., bytes: _Optional[int] = ..., passages: _Optional[int] = ..., document_ref: _Optional[str] = ...) -> None: ...

class CheckIndexingResponse(_message.Message):
    __slots__ = ("admitted", "reason", "message", "metadata", "corpus_id")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ADMITTED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    admitted: bool
    reason: _common_pb2.RefusalReason
    message: str
    metadata: _containers.ScalarMap[str, str]
    corpus_id: str
    def __init__(self, admitted: _Optional[bool] = ..., reason: _Optional[_Union[_common_pb2.RefusalReason, str]] = ..., message: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., corpus_id: _Optional[str] = ...) -> None: ...

class Webhook(_message.Message):
    __slots__ = ("webhook_id", "url", "event_types", "description", "state", "disabled_reason", "scope", "clearance", "cursor", "failed_attempts", "failing_since", "next_attempt_time", "previous_secret_expire_time", "created_by", "create_time", "update_time")
    WEBHOOK_ID_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPES_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    DISABLED_REASON_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    CLEARANCE_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    FAILED_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    FAILING_SINCE_FIELD_NUMBER: _ClassVar[int]
    NEXT_ATTEMPT_TIME_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_SECRET_EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    webhook_id: str
    url: str
    event_types: _containers.RepeatedScalarFieldContainer[str]
    description: str
    state: WebhookState
    disabled_reason: str
    scope: str
    clearance: str
    cursor: str
    failed_attempts: int
    failing_since: _timestamp_pb2.Timestamp
    next_attempt_time: _timestamp_pb2.Timestamp
    previous_secret_expire_time: _timestamp_pb2.Timestamp
    created_by: str
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, webhook_id: _Optional[str] = ..., url: _Optional[str] = ..., event_types: _Optional[_Iterable[str]] = ..., description: _Optional[str] = ..., state: _Optional[_Union[WebhookState, str]] = ..., disabled_reason: _Optional[str] = ..., scope: _Optional[str] = ..., clearance: _Optional[str] = ..., cursor: _Optional[str] = ..., failed_attempts: _Optional[int] = ..., failing_since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., next_attempt_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., previous_secret_expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created_by: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CreateWebhookRequest(_message.Message):
    __slots__ = ("url", "event_types", "description")
    URL_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPES_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    url: str
    event_types: _containers.RepeatedScalarFieldContainer[str]
    description: str
    def __init__(self, url: _Optional[str] = ..., event_types: _Optional[_Iterable[str]] = ..., description: _Optional[str] = ...) -> None: ...

class CreateWebhookResponse(_message.Message):
    __slots__ = ("webhook", "secret")
    WEBHOOK_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    webhook: Webhook
    secret: str
    def __init__(self, webhook: _Optional[_Union[Webhook, _Mapping]] = ..., secret: _Optional[str] = ...) -> None: ...

class ListWebhooksRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListWebhooksResponse(_message.Message):
    __slots__ = ("webhooks", "next_page_token")
    WEBHOOKS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    webhooks: _containers.RepeatedCompositeFieldContainer[Webhook]
    next_page_token: str
    def __init__(self, webhooks: _Optional[_Iterable[_Union[Webhook, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetWebhookRequest(_message.Message):
    __slots__ = ("webhook_id",)
    WEBHOOK_ID_FIELD_NUMBER: _ClassVar[int]
    webhook_id: str
    def __init__(self, webhook_id: _Optional[str] = ...) -> None: ...

class UpdateWebhookRequest(_message.Message):
    __slots__ = ("webhook_id", "webhook", "update_mask")
    WEBHOOK_ID_FIELD_NUMBER: _ClassVar[int]
    WEBHOOK_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    webhook_id: str
    webhook: Webhook
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, webhook_id: _Optional[str] = ..., webhook: _Optional[_Union[Webhook, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

class UpdateWebhookResponse(_message.Message):
    __slots__ = ("webhook",)
    WEBHOOK_FIELD_NUMBER: _ClassVar[int]
    webhook: Webhook
    def __init__(self, webhook: _Optional[_Union[Webhook, _Mapping]] = ...) -> None: ...

class DeleteWebhookRequest(_message.Message):
    __slots__ = ("webhook_id",)
    WEBHOOK_ID_FIELD_NUMBER: _ClassVar[int]
    webhook_id: str
    def __init__(self, webhook_id: _Optional[str] = ...) -> None: ...

class DeleteWebhookResponse(_message.Message):
    __slots__ = ("webhook_id",)
    WEBHOOK_ID_FIELD_NUMBER: _ClassVar[int]
    webhook_id: str
    def __init__(self, webhook_id: _Optional[str] = ...) -> None: ...

class RotateWebhookSecretRequest(_message.Message):
    __slots__ = ("webhook_id", "grace_seconds")
    WEBHOOK_ID_FIELD_NUMBER: _ClassVar[int]
    GRACE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    webhook_id: str
    grace_seconds: int
    def __init__(self, webhook_id: _Optional[str] = ..., grace_seconds: _Optional[int] = ...) -> None: ...

class RotateWebhookSecretResponse(_message.Message):
    __slots__ = ("webhook", "secret")
    WEBHOOK_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    webhook: Webhook
    secret: str
    def __init__(self, webhook: _Optional[_Union[Webhook, _Mapping]] = ..., secret: _Optional[str] = ...) -> None: ...

class ReplayWebhookRequest(_message.Message):
    __slots__ = ("webhook_id", "after")
    WEBHOOK_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    webhook_id: str
    after: str
    def __init__(self, webhook_id: _Optional[str] = ..., after: _Optional[str] = ...) -> None: ...

class ReplayWebhookResponse(_message.Message):
    __slots__ = ("webhook",)
    WEBHOOK_FIELD_NUMBER: _ClassVar[int]
    webhook: Webhook
    def __init__(self, webhook: _Optional[_Union[Webhook, _Mapping]] = ...) -> None: ...

class ListWebhookDeliveriesRequest(_message.Message):
    __slots__ = ("webhook_id", "page_size", "page_token")
    WEBHOOK_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    webhook_id: str
    page_size: int
    page_token: str
    def __init__(self, webhook_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class WebhookDelivery(_message.Message):
    __slots__ = ("delivery_id", "event_id", "cursor", "type", "attempt", "attempt_time", "status_code", "latency_ms", "delivered", "error")
    DELIVERY_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_TIME_FIELD_NUMBER: _ClassVar[int]
    STATUS_CODE_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    DELIVERED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    delivery_id: str
    event_id: str
    cursor: str
    type: str
    attempt: int
    attempt_time: _timestamp_pb2.Timestamp
    status_code: int
    latency_ms: int
    delivered: bool
    error: str
    def __init__(self, delivery_id: _Optional[str] = ..., event_id: _Optional[str] = ..., cursor: _Optional[str] = ..., type: _Optional[str] = ..., attempt: _Optional[int] = ..., attempt_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., status_code: _Optional[int] = ..., latency_ms: _Optional[int] = ..., delivered: _Optional[bool] = ..., error: _Optional[str] = ...) -> None: ...

class ListWebhookDeliveriesResponse(_message.Message):
    __slots__ = ("deliveries", "next_page_token")
    DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    deliveries: _containers.RepeatedCompositeFieldContainer[WebhookDelivery]
    next_page_token: str
    def __init__(self, deliveries: _Optional[_Iterable[_Union[WebhookDelivery, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class StartModelChangeRequest(_message.Message):
    __slots__ = ("to_model",)
    TO_MODEL_FIELD_NUMBER: _ClassVar[int]
    to_model: str
    def __init__(self, to_model: _Optional[str] = ...) -> None: ...

class GetModelChangeRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ModeFigures(_message.Message):
    __slots__ = ("ndcg_at_10", "recall_at_100")
    NDCG_AT_10_FIELD_NUMBER: _ClassVar[int]
    RECALL_AT_100_FIELD_NUMBER: _ClassVar[int]
    ndcg_at_10: float
    recall_at_100: float
    def __init__(self, ndcg_at_10: _Optional[float] = ..., recall_at_100: _Optional[float] = ...) -> None: ...

class ModelEvaluation(_message.Message):
    __slots__ = ("modes",)
    class ModesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: ModeFigures
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[ModeFigures, _Mapping]] = ...) -> None: ...
    MODES_FIELD_NUMBER: _ClassVar[int]
    modes: _containers.MessageMap[str, ModeFigures]
    def __init__(self, modes: _Optional[_Mapping[str, ModeFigures]] = ...) -> None: ...

class SwapModelRequest(_message.Message):
    __slots__ = ("current", "candidate", "force", "margin")
    CURRENT_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    MARGIN_FIELD_NUMBER: _ClassVar[int]
    current: ModelEvaluation
    candidate: ModelEvaluation
    force: bool
    margin: float
    def __init__(self, current: _Optional[_Union[ModelEvaluation, _Mapping]] = ..., candidate: _Optional[_Union[ModelEvaluation, _Mapping]] = ..., force: _Optional[bool] = ..., margin: _Optional[float] = ...) -> None: ...

class EvaluationQuery(_message.Message):
    __slots__ = ("query_id", "text", "relevant")
    class RelevantEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    QUERY_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    RELEVANT_FIELD_NUMBER: _ClassVar[int]
    query_id: str
    text: str
    relevant: _containers.ScalarMap[str, int]
    def __init__(self, query_id: _Optional[str] = ..., text: _Optional[str] = ..., relevant: _Optional[_Mapping[str, int]] = ...) -> None: ...

class EvaluationSet(_message.Message):
    __slots__ = ("name", "corpus_id", "queries", "update_time")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    QUERIES_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    name: str
    corpus_id: str
    queries: _containers.RepeatedCompositeFieldContainer[EvaluationQuery]
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, name: _Optional[str] = ..., corpus_id: _Optional[str] = ..., queries: _Optional[_Iterable[_Union[EvaluationQuery, _Mapping]]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class PutEvaluationSetRequest(_message.Message):
    __slots__ = ("name", "corpus_id", "queries")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    QUERIES_FIELD_NUMBER: _ClassVar[int]
    name: str
    corpus_id: str
    queries: _containers.RepeatedCompositeFieldContainer[EvaluationQuery]
    def __init__(self, name: _Optional[str] = ..., corpus_id: _Optional[str] = ..., queries: _Optional[_Iterable[_Union[EvaluationQuery, _Mapping]]] = ...) -> None: ...

class DeleteEvaluationSetRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteEvaluationSetResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RollbackModelChangeRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CancelModelChangeRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ModelChange(_message.Message):
    __slots__ = ("change_id", "from_model", "to_model", "to_dimension", "state", "chunks_done", "chunks_total", "chunks_per_second", "eta_seconds", "forced", "gate_reason", "current_figures", "candidate_figures", "reading_model", "create_time", "swap_time", "end_time")
    CHANGE_ID_FIELD_NUMBER: _ClassVar[int]
    FROM_MODEL_FIELD_NUMBER: _ClassVar[int]
    TO_MODEL_FIELD_NUMBER: _ClassVar[int]
    TO_DIMENSION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_DONE_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    ETA_SECONDS_FIELD_NUMBER: _ClassVar[int]
    FORCED_FIELD_NUMBER: _ClassVar[int]
    GATE_REASON_FIELD_NUMBER: _ClassVar[int]
    CURRENT_FIGURES_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_FIGURES_FIELD_NUMBER: _ClassVar[int]
    READING_MODEL_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    SWAP_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    change_id: str
    from_model: str
    to_model: str
    to_dimension: int
    state: ModelChangeState
    chunks_done: int
    chunks_total: int
    chunks_per_second: float
    eta_seconds: float
    forced: bool
    gate_reason: str
    current_figures: ModelEvaluation
    candidate_figures: ModelEvaluation
    reading_model: str
    create_time: _timestamp_pb2.Timestamp
    swap_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    def __init__(self, change_id: _Optional[str] = ..., from_model: _Optional[str] = ..., to_model: _Optional[str] = ..., to_dimension: _Optional[int] = ..., state: _Optional[_Union[ModelChangeState, str]] = ..., chunks_done: _Optional[int] = ..., chunks_total: _Optional[int] = ..., chunks_per_second: _Optional[float] = ..., eta_seconds: _Optional[float] = ..., forced: _Optional[bool] = ..., gate_reason: _Optional[str] = ..., current_figures: _Optional[_Union[ModelEvaluation, _Mapping]] = ..., candidate_figures: _Optional[_Union[ModelEvaluation, _Mapping]] = ..., reading_model: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., swap_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class StartModelChangeResponse(_message.Message):
    __slots__ = ("change",)
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    change: ModelChange
    def __init__(self, change: _Optional[_Union[ModelChange, _Mapping]] = ...) -> None: ...

class SwapModelResponse(_message.Message):
    __slots__ = ("change",)
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    change: ModelChange
    def __init__(self, change: _Optional[_Union[ModelChange, _Mapping]] = ...) -> None: ...

class RollbackModelChangeResponse(_message.Message):
    __slots__ = ("change",)
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    change: ModelChange
    def __init__(self, change: _Optional[_Union[ModelChange, _Mapping]] = ...) -> None: ...

class CancelModelChangeResponse(_message.Message):
    __slots__ = ("change",)
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    change: ModelChange
    def __init__(self, change: _Optional[_Union[ModelChange, _Mapping]] = ...) -> None: ...
