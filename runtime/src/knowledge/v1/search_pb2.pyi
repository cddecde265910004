from google.api import annotations_pb2 as _annotations_pb2
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
SEARCH_MODE_UNSPECIFIED: SearchMode
SEARCH_MODE_HYBRID: SearchMode
SEARCH_MODE_VECTOR: SearchMode
SEARCH_MODE_LEXICAL: SearchMode
RELEVANCE_UNSPECIFIED: Relevance
RELEVANCE_HIGH: Relevance
RELEVANCE_MODERATE: Relevance
RELEVANCE_LOW: Relevance
RELEVANCE_LEXICAL_MATCH: Relevance

class ChannelWeights(_message.Message):
    __slots__ = ("vector", "lexical")
    VECTOR_FIELD_NUMBER: _ClassVar[int]
    LEXICAL_FIELD_NUMBER: _ClassVar[int]
    vector: float
    lexical: float
    def __init__(self, vector: _Optional[float] = ..., lexical: _Optional[float] = ...) -> None: ...

class SearchRequest(_message.Message):
    __slots__ = ("query", "corpus_id", "document_id", "top_k", "mode", "weights", "rerank")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    RERANK_FIELD_NUMBER: _ClassVar[int]
    query: str
    corpus_id: str
    document_id: str
    top_k: int
    mode: SearchMode
    weights: ChannelWeights
    rerank: bool
    def __init__(self, query: _Optional[str] = ..., corpus_id: _Optional[str] = ..., document_id: _Optional[str] = ..., top_k: _Optional[int] = ..., mode: _Optional[_Union[SearchMode, str]] = ..., weights: _Optional[_Union[ChannelWeights, _Mapping]] = ..., rerank: _Optional[bool] = ...) -> None: ...

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
    __slots__ = ("document_id", "filename", "chunk_id", "section", "page", "score", "vector_rank", "lexical_rank", "fused_score", "content", "corpus_id", "source_url", "rerank_score")
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
    def __init__(self, document_id: _Optional[str] = ..., filename: _Optional[str] = ..., chunk_id: _Optional[str] = ..., section: _Optional[str] = ..., page: _Optional[int] = ..., score: _Optional[float] = ..., vector_rank: _Optional[int] = ..., lexical_rank: _Optional[int] = ..., fused_score: _Optional[float] = ..., content: _Optional[str] = ..., corpus_id: _Optional[str] = ..., source_url: _Optional[str] = ..., rerank_score: _Optional[float] = ...) -> None: ...

class SearchDocumentsRequest(_message.Message):
    __slots__ = ("query", "corpus_id", "document_id", "top_k", "mode", "rerank")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    RERANK_FIELD_NUMBER: _ClassVar[int]
    query: str
    corpus_id: str
    document_id: str
    top_k: int
    mode: SearchMode
    rerank: bool
    def __init__(self, query: _Optional[str] = ..., corpus_id: _Optional[str] = ..., document_id: _Optional[str] = ..., top_k: _Optional[int] = ..., mode: _Optional[_Union[SearchMode, str]] = ..., rerank: _Optional[bool] = ...) -> None: ...

class SearchDocumentsResponse(_message.Message):
    __slots__ = ("text", "relevance", "result_count")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    RELEVANCE_FIELD_NUMBER: _ClassVar[int]
    RESULT_COUNT_FIELD_NUMBER: _ClassVar[int]
    text: str
    relevance: Relevance
    result_count: int
    def __init__(self, text: _Optional[str] = ..., relevance: _Optional[_Union[Relevance, str]] = ..., result_count: _Optional[int] = ...) -> None: ...

class QueryRequest(_message.Message):
    __slots__ = ("query", "corpus_id", "top_k", "document_id", "rerank")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    RERANK_FIELD_NUMBER: _ClassVar[int]
    query: str
    corpus_id: str
    top_k: int
    document_id: str
    rerank: bool
    def __init__(self, query: _Optional[str] = ..., corpus_id: _Optional[str] = ..., top_k: _Optional[int] = ..., document_id: _Optional[str] = ..., rerank: _Optional[bool] = ...) -> None: ...

class QueryResponse(_message.Message):
    __slots__ = ("answer", "citations", "relevance", "cost", "fallback_reason", "fallback_message")
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    CITATIONS_FIELD_NUMBER: _ClassVar[int]
    RELEVANCE_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_REASON_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    answer: str
    citations: _containers.RepeatedCompositeFieldContainer[Citation]
    relevance: Relevance
    cost: _common_pb2.Cost
    fallback_reason: _common_pb2.RefusalReason
    fallback_message: str
    def __init__(self, answer: _Optional[str] = ..., citations: _Optional[_Iterable[_Union[Citation, _Mapping]]] = ..., relevance: _Optional[_Union[Relevance, str]] = ..., cost: _Optional[_Union[_common_pb2.Cost, _Mapping]] = ..., fallback_reason: _Optional[_Union[_common_pb2.RefusalReason, str]] = ..., fallback_message: _Optional[str] = ...) -> None: ...

class Citation(_message.Message):
    __slots__ = ("document_id", "filename", "page", "section", "excerpt", "chunk_id", "source_url")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    SECTION_FIELD_NUMBER: _ClassVar[int]
    EXCERPT_FIELD_NUMBER: _ClassVar[int]
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_URL_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    filename: str
    page: int
    section: str
    excerpt: str
    chunk_id: str
    source_url: str
    def __init__(self, document_id: _Optional[str] = ..., filename: _Optional[str] = ..., page: _Optional[int] = ..., section: _Optional[str] = ..., excerpt: _Optional[str] = ..., chunk_id: _Optional[str] = ..., source_url: _Optional[str] = ...) -> None: ...
