from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from knowledge.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SearchMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SEARCH_MODE_UNSPECIFIED: _ClassVar[SearchMode]
    SEARCH_MODE_HYBRID: _ClassVar[SearchMode]
    SEARCH_MODE_VECTOR: _ClassVar[SearchMode]
    SEARCH_MODE_LEXICAL: _ClassVar[SearchMode]

class Relevance(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RELEVANCE_UNSPECIFIED: _ClassVar[Relevance]
    RELEVANCE_HIGH: _ClassVar[Relevance]
    RELEVANCE_MODERATE: _ClassVar[Relevance]
    RELEVANCE_LOW: _ClassVar[Relevance]
    RELEVANCE_LEXICAL_MATCH: _ClassVar[Relevance]

class EmbeddingVectors(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EMBEDDING_VECTORS_UNSPECIFIED: _ClassVar[EmbeddingVectors]
    EMBEDDING_VECTORS_CURRENT: _ClassVar[EmbeddingVectors]
    EMBEDDING_VECTORS_CANDIDATE: _ClassVar[EmbeddingVectors]

class TurnRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TURN_ROLE_UNSPECIFIED: _ClassVar[TurnRole]
    TURN_ROLE_USER: _ClassVar[TurnRole]
    TURN_ROLE_ASSISTANT: _ClassVar[TurnRole]

class SupportLevel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SUPPORT_LEVEL_UNSPECIFIED: _ClassVar[SupportLevel]
    SUPPORT_LEVEL_SUPPORTED: _ClassVar[SupportLevel]
    SUPPORT_LEVEL_PARTIAL: _ClassVar[SupportLevel]
    SUPPORT_LEVEL_UNKNOWN: _ClassVar[SupportLevel]

class FactStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FACT_STATUS_UNSPECIFIED: _ClassVar[FactStatus]
    FACT_STATUS_GROUNDED: _ClassVar[FactStatus]
    FACT_STATUS_UNRESOLVED: _ClassVar[FactStatus]
SEARCH_MODE_UNSPECIFIED: SearchMode
SEARCH_MODE_HYBRID: SearchMode
SEARCH_MODE_VECTOR: SearchMode
SEARCH_MODE_LEXICAL: SearchMode
RELEVANCE_UNSPECIFIED: Relevance
RELEVANCE_HIGH: Relevance
RELEVANCE_MODERATE: Relevance
RELEVANCE_LOW: Relevance
RELEVANCE_LEXICAL_MATCH: Relevance
EMBEDDING_VECTORS_UNSPECIFIED: EmbeddingVectors
EMBEDDING_VECTORS_CURRENT: EmbeddingVectors
EMBEDDING_VECTORS_CANDIDATE: EmbeddingVectors
TURN_ROLE_UNSPECIFIED: TurnRole
TURN_ROLE_USER: TurnRole
TURN_ROLE_ASSISTANT: TurnRole
SUPPORT_LEVEL_UNSPECIFIED: SupportLevel
SUPPORT_LEVEL_SUPPORTED: SupportLevel
SUPPORT_LEVEL_PARTIAL: SupportLevel
SUPPORT_LEVEL_UNKNOWN: SupportLevel
FACT_STATUS_UNSPECIFIED: FactStatus
FACT_STATUS_GROUNDED: FactStatus
FACT_STATUS_UNRESOLVED: FactStatus

class ChannelWeights(_message.Message):
    __slots__ = ("vector", "lexical")
    VECTOR_FIELD_NUMBER: _ClassVar[int]
    LEXICAL_FIELD_NUMBER: _ClassVar[int]
    vector: float
    lexical: float
    def __init__(self, vector: _Optional[float] = ..., lexical: _Optional[float] = ...) -> None: ...

class SearchRequest(_message.Message):
    __slots__ = ("query", "corpus_id", "document_id", "top_k", "mode", "weights", "rerank", "filter", "corpus_key", "vectors")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    RERANK_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    CORPUS_KEY_FIELD_NUMBER: _ClassVar[int]
    VECTORS_FIELD_NUMBER: _ClassVar[int]
    query: str
    corpus_id: str
    document_id: str
    top_k: int
    mode: SearchMode
    weights: ChannelWeights
    rerank: bool
    filter: str
    corpus_key: str
    vectors: EmbeddingVectors
    def __init__(self, query: _Optional[str] = ..., corpus_id: _Optional[str] = ..., document_id: _Optional[str] = ..., top_k: _Optional[int] = ..., mode: _Optional[_Union[SearchMode, str]] = ..., weights: _Optional[_Union[ChannelWeights, _Mapping]] = ..., rerank: _Optional[bool] = ..., filter: _Optional[str] = ..., corpus_key: _Optional[str] = ..., vectors: _Optional[_Union[EmbeddingVectors, str]] = ...) -> None: ...

class SearchResponse(_message.Message):
    __slots__ = ("relevance", "results", "warnings")
    RELEVANCE_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    relevance: Relevance
    results: _containers.RepeatedCompositeFieldContainer[SearchResult]
    warnings: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, relevance: _Optional[_Union[Relevance, str]] = ..., results: _Optional[_Iterable[_Union[SearchResult, _Mapping]]] = ..., warnings: _Optional[_Iterable[str]] = ...) -> None: ...

class SearchResult(_message.Message):
    __slots__ = ("document_id", "filename", "chunk_id", "section", "page", "score", "vector_rank", "lexical_rank", "fused_score", "content", "corpus_id", "source_url", "rerank_score", "document_ref", "fragment", "metadata", "document_metadata")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    SECTION_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    VECTOR_RANK_FIELD_NUMBER: _ClassVar[int]
    LEXICAL_RANK_FIELD_NUMBER: _ClassVar[int]
    FUSED_SCORE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_URL_FIELD_NUMBER: _ClassVar[int]
    RERANK_SCORE_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_REF_FIELD_NUMBER: _ClassVar[int]
    FRAGMENT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_METADATA_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    filename: str
    chunk_id: str
    section: str
    page: int
    score: float
    vector_rank: int
    lexical_rank: int
    fused_score: float
    content: str
    corpus_id: str
    source_url: str
    rerank_score: float
    document_ref: str
    fragment: str
    metadata: _struct_pb2.Struct
    document_metadata: _struct_pb2.Struct
    def __init__(self, document_id: _Optional[str] = ..., filename: _Optional[str] = ..., chunk_id: _Optional[str] = ..., section: _Optional[str] = ..., page: _Optional[int] = ..., score: _Optional[float] = ..., vector_rank: _Optional[int] = ..., lexical_rank: _Optional[int] = ..., fused_score: _Optional[float] = ..., content: _Optional[str] = ..., corpus_id: _Optional[str] = ..., source_url: _Optional[str] = ..., rerank_score: _Optional[float] = ..., document_ref: _Optional[str] = ..., fragment: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., document_metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class SearchDocumentsRequest(_message.Message):
    __slots__ = ("query", "corpus_id", "document_id", "top_k", "mode", "rerank", "filter", "corpus_key", "history")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    RERANK_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    CORPUS_KEY_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    query: str
    corpus_id: str
    document_id: str
    top_k: int
    mode: SearchMode
    rerank: bool
    filter: str
    corpus_key: str
    history: _containers.RepeatedCompositeFieldContainer[Turn]
    def __init__(self, query: _Optional[str] = ..., corpus_id: _Optional[str] = ..., document_id: _Optional[str] = ..., top_k: _Optional[int] = ..., mode: _Optional[_Union[SearchMode, str]] = ..., rerank: _Optional[bool] = ..., filter: _Optional[str] = ..., corpus_key: _Optional[str] = ..., history: _Optional[_Iterable[_Union[Turn, _Mapping]]] = ...) -> None: ...

class SearchDocumentsResponse(_message.Message):
    __slots__ = ("text", "relevance", "result_count", "synthesis", "results")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    RELEVANCE_FIELD_NUMBER: _ClassVar[int]
    RESULT_COUNT_FIELD_NUMBER: _ClassVar[int]
    SYNTHESIS_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    text: str
    relevance: Relevance
    result_count: int
    synthesis: str
    results: _containers.RepeatedCompositeFieldContainer[SearchResult]
    def __init__(self, text: _Optional[str] = ..., relevance: _Optional[_Union[Relevance, str]] = ..., result_count: _Optional[int] = ..., synthesis: _Optional[str] = ..., results: _Optional[_Iterable[_Union[SearchResult, _Mapping]]] = ...) -> None: ...

class QueryRequest(_message.Message):
    __slots__ = ("query", "corpus_id", "top_k", "document_id", "rerank", "filter", "corpus_key", "history")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    RERANK_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    CORPUS_KEY_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    query: str
    corpus_id: str
    top_k: int
    document_id: str
    rerank: bool
    filter: str
    corpus_key: str
    history: _containers.RepeatedCompositeFieldContainer[Turn]
    def __init__(self, query: _Optional[str] = ..., corpus_id: _Optional[str] = ..., top_k: _Optional[int] = ..., document_id: _Optional[str] = ..., rerank: _Optional[bool] = ..., filter: _Optional[str] = ..., corpus_key: _Optional[str] = ..., history: _Optional[_Iterable[_Union[Turn, _Mapping]]] = ...) -> None: ...

class QueryResponse(_message.Message):
    __slots__ = ("answer", "citations", "relevance", "cost", "fallback_reason", "fallback_message", "condensed_query", "conversation_note")
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    CITATIONS_FIELD_NUMBER: _ClassVar[int]
    RELEVANCE_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_REASON_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CONDENSED_QUERY_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_NOTE_FIELD_NUMBER: _ClassVar[int]
    answer: str
    citations: _containers.RepeatedCompositeFieldContainer[Citation]
    relevance: Relevance
    cost: _common_pb2.Cost
    fallback_reason: _common_pb2.RefusalReason
    fallback_message: str
    condensed_query: str
    conversation_note: str
    def __init__(self, answer: _Optional[str] = ..., citations: _Optional[_Iterable[_Union[Citation, _Mapping]]] = ..., relevance: _Optional[_Union[Relevance, str]] = ..., cost: _Optional[_Union[_common_pb2.Cost, _Mapping]] = ..., fallback_reason: _Optional[_Union[_common_pb2.RefusalReason, str]] = ..., fallback_message: _Optional[str] = ..., condensed_query: _Optional[str] = ..., conversation_note: _Optional[str] = ...) -> None: ...

class Turn(_message.Message):
    __slots__ = ("role", "text")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    role: TurnRole
    text: str
    def __init__(self, role: _Optional[_Union[TurnRole, str]] = ..., text: _Optional[str] = ...) -> None: ...

class QueryStreamRequest(_message.Message):
    __slots__ = ("query",)
    QUERY_FIELD_NUMBER: _ClassVar[int]
    query: QueryRequest
    def __init__(self, query: _Optional[_Union[QueryRequest, _Mapping]] = ...) -> None: ...

class QueryStreamResponse(_message.Message):
    __slots__ = ("started", "delta", "done")
    STARTED_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    started: QueryStarted
    delta: str
    done: QueryResponse
    def __init__(self, started: _Optional[_Union[QueryStarted, _Mapping]] = ..., delta: _Optional[str] = ..., done: _Optional[_Union[QueryResponse, _Mapping]] = ...) -> None: ...

class QueryStarted(_message.Message):
    __slots__ = ("relevance", "condensed_query", "source_count")
    RELEVANCE_FIELD_NUMBER: _ClassVar[int]
    CONDENSED_QUERY_FIELD_NUMBER: _ClassVar[int]
    SOURCE_COUNT_FIELD_NUMBER: _ClassVar[int]
    relevance: Relevance
    condensed_query: str
    source_count: int
    def __init__(self, relevance: _Optional[_Union[Relevance, str]] = ..., condensed_query: _Optional[str] = ..., source_count: _Optional[int] = ...) -> None: ...

class Citation(_message.Message):
    __slots__ = ("document_id", "filename", "page", "section", "excerpt", "chunk_id", "source_url", "document_ref", "fragment", "metadata", "document_metadata")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    SECTION_FIELD_NUMBER: _ClassVar[int]
    EXCERPT_FIELD_NUMBER: _ClassVar[int]
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_URL_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_REF_FIELD_NUMBER: _ClassVar[int]
    FRAGMENT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_METADATA_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    filename: str
    page: int
    section: str
    excerpt: str
    chunk_id: str
    source_url: str
    document_ref: str
    fragment: str
    metadata: _struct_pb2.Struct
    document_metadata: _struct_pb2.Struct
    def __init__(self, document_id: _Optional[str] = ..., filename: _Optional[str] = ..., page: _Optional[int] = ..., section: _Optional[str] = ..., excerpt: _Optional[str] = ..., chunk_id: _Optional[str] = ..., source_url: _Optional[str] = ..., document_ref: _Optional[str] = ..., fragment: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., document_metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class GetContextRequest(_message.Message):
    __slots__ = ("query", "corpus_id", "top_k", "filter", "corpus_key")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    CORPUS_KEY_FIELD_NUMBER: _ClassVar[int]
    query: str
    corpus_id: str
    top_k: int
    filter: str
    corpus_key: str
    def __init__(self, query: _Optional[str] = ..., corpus_id: _Optional[str] = ..., top_k: _Optional[int] = ..., filter: _Optional[str] = ..., corpus_key: _Optional[str] = ...) -> None: ...

class GetContextResponse(_message.Message):
    __slots__ = ("context",)
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    context: KnowledgeContext
    def __init__(self, context: _Optional[_Union[KnowledgeContext, _Mapping]] = ...) -> None: ...

class KnowledgeContext(_message.Message):
    __slots__ = ("facts", "evidence", "metadata", "rendered")
    FACTS_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    RENDERED_FIELD_NUMBER: _ClassVar[int]
    facts: _containers.RepeatedCompositeFieldContainer[Fact]
    evidence: _containers.RepeatedCompositeFieldContainer[Evidence]
    metadata: ContextMetadata
    rendered: str
    def __init__(self, facts: _Optional[_Iterable[_Union[Fact, _Mapping]]] = ..., evidence: _Optional[_Iterable[_Union[Evidence, _Mapping]]] = ..., metadata: _Optional[_Union[ContextMetadata, _Mapping]] = ..., rendered: _Optional[str] = ...) -> None: ...

class Fact(_message.Message):
    __slots__ = ("statement", "support", "confidence", "evidence_ids", "status")
    STATEMENT_FIELD_NUMBER: _ClassVar[int]
    SUPPORT_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_IDS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    statement: str
    support: SupportLevel
    confidence: float
    evidence_ids: _containers.RepeatedScalarFieldContainer[str]
    status: FactStatus
    def __init__(self, statement: _Optional[str] = ..., support: _Optional[_Union[SupportLevel, str]] = ..., confidence: _Optional[float] = ..., evidence_ids: _Optional[_Iterable[str]] = ..., status: _Optional[_Union[FactStatus, str]] = ...) -> None: ...

class Evidence(_message.Message):
    __slots__ = ("evidence_id", "document_id", "filename", "page", "section", "source_url", "excerpt", "excerpt_sha256", "extractor", "chunk_id", "score", "document_ref", "fragment", "metadata", "document_metadata")
    EVIDENCE_ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    SECTION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_URL_FIELD_NUMBER: _ClassVar[int]
    EXCERPT_FIELD_NUMBER: _ClassVar[int]
    EXCERPT_SHA256_FIELD_NUMBER: _ClassVar[int]
    EXTRACTOR_FIELD_NUMBER: _ClassVar[int]
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_REF_FIELD_NUMBER: _ClassVar[int]
    FRAGMENT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_METADATA_FIELD_NUMBER: _ClassVar[int]
    evidence_id: str
    document_id: str
    filename: str
    page: int
    section: str
    source_url: str
    excerpt: str
    excerpt_sha256: str
    extractor: str
    chunk_id: str
    score: float
    document_ref: str
    fragment: str
    metadata: _struct_pb2.Struct
    document_metadata: _struct_pb2.Struct
    def __init__(self, evidence_id: _Optional[str] = ..., document_id: _Optional[str] = ..., filename: _Optional[str] = ..., page: _Optional[int] = ..., section: _Optional[str] = ..., source_url: _Optional[str] = ..., excerpt: _Optional[str] = ..., excerpt_sha256: _Optional[str] = ..., extractor: _Optional[str] = ..., chunk_id: _Optional[str] = ..., score: _Optional[float] = ..., document_ref: _Optional[str] = ..., fragment: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., document_metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ContextMetadata(_message.Message):
    __slots__ = ("query", "scope", "backend", "fact_count", "evidence_count", "unresolved_count", "elapsed_ms", "truncated", "degradations", "relevance")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    FACT_COUNT_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_COUNT_FIELD_NUMBER: _ClassVar[int]
    UNRESOLVED_COUNT_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_MS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    DEGRADATIONS_FIELD_NUMBER: _ClassVar[int]
    RELEVANCE_FIELD_NUMBER: _ClassVar[int]
    query: str
    scope: str
    backend: str
    fact_count: int
    evidence_count: int
    unresolved_count: int
    elapsed_ms: int
    truncated: bool
    degradations: _containers.RepeatedScalarFieldContainer[str]
    relevance: Relevance
    def __init__(self, query: _Optional[str] = ..., scope: _Optional[str] = ..., backend: _Optional[str] = ..., fact_count: _Optional[int] = ..., evidence_count: _Optional[int] = ..., unresolved_count: _Optional[int] = ..., elapsed_ms: _Optional[int] = ..., truncated: _Optional[bool] = ..., degradations: _Optional[_Iterable[str]] = ..., relevance: _Optional[_Union[Relevance, str]] = ...) -> None: ...

class PrefetchContextRequest(_message.Message):
    __slots__ = ("user_message",)
    USER_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    user_message: str
    def __init__(self, user_message: _Optional[str] = ...) -> None: ...

class PrefetchContextResponse(_message.Message):
    __slots__ = ("rendered", "degraded", "degradations", "entry_count", "elapsed_ms")
    RENDERED_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_FIELD_NUMBER: _ClassVar[int]
    DEGRADATIONS_FIELD_NUMBER: _ClassVar[int]
    ENTRY_COUNT_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_MS_FIELD_NUMBER: _ClassVar[int]
    rendered: str
    degraded: bool
    degradations: _containers.RepeatedScalarFieldContainer[str]
    entry_count: int
    elapsed_ms: int
    def __init__(self, rendered: _Optional[str] = ..., degraded: _Optional[bool] = ..., degradations: _Optional[_Iterable[str]] = ..., entry_count: _Optional[int] = ..., elapsed_ms: _Optional[int] = ...) -> None: ...
