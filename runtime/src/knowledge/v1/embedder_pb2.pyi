from knowledge.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class IndexKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INDEX_KIND_UNSPECIFIED: _ClassVar[IndexKind]
    INDEX_KIND_CHUNK: _ClassVar[IndexKind]
    INDEX_KIND_ANCHOR: _ClassVar[IndexKind]
INDEX_KIND_UNSPECIFIED: IndexKind
INDEX_KIND_CHUNK: IndexKind
INDEX_KIND_ANCHOR: IndexKind

class InfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class InfoResponse(_message.Message):
    __slots__ = ("model_id", "dimension", "device", "max_seq_length", "backend", "max_batch_tokens", "tokenizer_sha256", "models")
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    MAX_SEQ_LENGTH_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    MAX_BATCH_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOKENIZER_SHA256_FIELD_NUMBER: _ClassVar[int]
    MODELS_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    dimension: int
    device: str
    max_seq_length: int
    backend: str
    max_batch_tokens: int
    tokenizer_sha256: str
    models: _containers.RepeatedCompositeFieldContainer[EmbeddingModel]
    def __init__(self, model_id: _Optional[str] = ..., dimension: _Optional[int] = ..., device: _Optional[str] = ..., max_seq_length: _Optional[int] = ..., backend: _Optional[str] = ..., max_batch_tokens: _Optional[int] = ..., tokenizer_sha256: _Optional[str] = ..., models: _Optional[_Iterable[_Union[EmbeddingModel, _Mapping]]] = ...) -> None: ...

class EmbeddingModel(_message.Message):
    __slots__ = ("model_id", "dimension", "backend", "max_seq_length", "tokenizer_sha256")
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    MAX_SEQ_LENGTH_FIELD_NUMBER: _ClassVar[int]
    TOKENIZER_SHA256_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    dimension: int
    backend: str
    max_seq_length: int
    tokenizer_sha256: str
    def __init__(self, model_id: _Optional[str] = ..., dimension: _Optional[int] = ..., backend: _Optional[str] = ..., max_seq_length: _Optional[int] = ..., tokenizer_sha256: _Optional[str] = ...) -> None: ...

class ReadTokenizerRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TokenizerDescription(_message.Message):
    __slots__ = ("model_id", "tokenizer_sha256", "max_seq_length", "size_bytes")
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    TOKENIZER_SHA256_FIELD_NUMBER: _ClassVar[int]
    MAX_SEQ_LENGTH_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    tokenizer_sha256: str
    max_seq_length: int
    size_bytes: int
    def __init__(self, model_id: _Optional[str] = ..., tokenizer_sha256: _Optional[str] = ..., max_seq_length: _Optional[int] = ..., size_bytes: _Optional[int] = ...) -> None: ...

class ReadTokenizerResponse(_message.Message):
    __slots__ = ("tokenizer", "chunk")
    TOKENIZER_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    tokenizer: TokenizerDescription
    chunk: bytes
    def __init__(self, tokenizer: _Optional[_Union[TokenizerDescription, _Mapping]] = ..., chunk: _Optional[bytes] = ...) -> None: ...

class EmbedTextsRequest(_message.Message):
    __slots__ = ("texts", "tokenizer_sha256", "model")
    TEXTS_FIELD_NUMBER: _ClassVar[int]
    TOKENIZER_SHA256_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    texts: _containers.RepeatedScalarFieldContainer[str]
    tokenizer_sha256: str
    model: str
    def __init__(self, texts: _Optional[_Iterable[str]] = ..., tokenizer_sha256: _Optional[str] = ..., model: _Optional[str] = ...) -> None: ...

class EmbedTextsResponse(_message.Message):
    __slots__ = ("vectors", "token_counts", "truncated_indexes", "cost", "pooled_indexes")
    VECTORS_FIELD_NUMBER: _ClassVar[int]
    TOKEN_COUNTS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_INDEXES_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    POOLED_INDEXES_FIELD_NUMBER: _ClassVar[int]
    vectors: _containers.RepeatedCompositeFieldContainer[_common_pb2.Vector]
    token_counts: _containers.RepeatedScalarFieldContainer[int]
    truncated_indexes: _containers.RepeatedScalarFieldContainer[int]
    cost: _common_pb2.Cost
    pooled_indexes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, vectors: _Optional[_Iterable[_Union[_common_pb2.Vector, _Mapping]]] = ..., token_counts: _Optional[_Iterable[int]] = ..., truncated_indexes: _Optional[_Iterable[int]] = ..., cost: _Optional[_Union[_common_pb2.Cost, _Mapping]] = ..., pooled_indexes: _Optional[_Iterable[int]] = ...) -> None: ...

class EmbedQueryRequest(_message.Message):
    __slots__ = ("query", "model")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    query: str
    model: str
    def __init__(self, query: _Optional[str] = ..., model: _Optional[str] = ...) -> None: ...

class EmbedQueryResponse(_message.Message):
    __slots__ = ("vector", "truncated_characters", "warnings", "cost")
    VECTOR_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_CHARACTERS_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    vector: _common_pb2.Vector
    truncated_characters: int
    warnings: _containers.RepeatedScalarFieldContainer[str]
    cost: _common_pb2.Cost
    def __init__(self, vector: _Optional[_Union[_common_pb2.Vector, _Mapping]] = ..., truncated_characters: _Optional[int] = ..., warnings: _Optional[_Iterable[str]] = ..., cost: _Optional[_Union[_common_pb2.Cost, _Mapping]] = ...) -> None: ...

class DocumentBinding(_message.Message):
    __slots__ = ("document_id", "corpus_id", "source")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    corpus_id: str
    source: str
    def __init__(self, document_id: _Optional[str] = ..., corpus_id: _Optional[str] = ..., source: _Optional[str] = ...) -> None: ...

class AnchorTarget(_message.Message):
    __slots__ = ("entity_type", "entity_id")
    ENTITY_TYPE_FIELD_NUMBER: _ClassVar[int]
    ENTITY_ID_FIELD_NUMBER: _ClassVar[int]
    entity_type: str
    entity_id: str
    def __init__(self, entity_type: _Optional[str] = ..., entity_id: _Optional[str] = ...) -> None: ...

class IndexRequest(_message.Message):
    __slots__ = ("content", "kind", "document", "anchor", "return_vectors")
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    ANCHOR_FIELD_NUMBER: _ClassVar[int]
    RETURN_VECTORS_FIELD_NUMBER: _ClassVar[int]
    content: str
    kind: IndexKind
    document: DocumentBinding
    anchor: AnchorTarget
    return_vectors: bool
    def __init__(self, content: _Optional[str] = ..., kind: _Optional[_Union[IndexKind, str]] = ..., document: _Optional[_Union[DocumentBinding, _Mapping]] = ..., anchor: _Optional[_Union[AnchorTarget, _Mapping]] = ..., return_vectors: _Optional[bool] = ...) -> None: ...

class IndexResponse(_message.Message):
    __slots__ = ("chunk_ids", "chunk_count", "truncated_characters", "cost", "vectors")
    CHUNK_IDS_FIELD_NUMBER: _ClassVar[int]
    CHUNK_COUNT_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_CHARACTERS_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    VECTORS_FIELD_NUMBER: _ClassVar[int]
    chunk_ids: _containers.RepeatedScalarFieldContainer[str]
    chunk_count: int
    truncated_characters: int
    cost: _common_pb2.Cost
    vectors: _containers.RepeatedCompositeFieldContainer[_common_pb2.Vector]
    def __init__(self, chunk_ids: _Optional[_Iterable[str]] = ..., chunk_count: _Optional[int] = ..., truncated_characters: _Optional[int] = ..., cost: _Optional[_Union[_common_pb2.Cost, _Mapping]] = ..., vectors: _Optional[_Iterable[_Union[_common_pb2.Vector, _Mapping]]] = ...) -> None: ...

class RefreshAnchorRequest(_message.Message):
    __slots__ = ("target", "content")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    target: AnchorTarget
    content: str
    def __init__(self, target: _Optional[_Union[AnchorTarget, _Mapping]] = ..., content: _Optional[str] = ...) -> None: ...

class RefreshAnchorResponse(_message.Message):
    __slots__ = ("anchor_id", "piece_count", "truncated_characters", "cost")
    ANCHOR_ID_FIELD_NUMBER: _ClassVar[int]
    PIECE_COUNT_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_CHARACTERS_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    anchor_id: str
    piece_count: int
    truncated_characters: int
    cost: _common_pb2.Cost
    def __init__(self, anchor_id: _Optional[str] = ..., piece_count: _Optional[int] = ..., truncated_characters: _Optional[int] = ..., cost: _Optional[_Union[_common_pb2.Cost, _Mapping]] = ...) -> None: ...

class SearchAnchorsRequest(_message.Message):
    __slots__ = ("query", "entity_type", "top_k")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    ENTITY_TYPE_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    query: str
    entity_type: str
    top_k: int
    def __init__(self, query: _Optional[str] = ..., entity_type: _Optional[str] = ..., top_k: _Optional[int] = ...) -> None: ...

class SearchAnchorsResponse(_message.Message):
    __slots__ = ("matches",)
    MATCHES_FIELD_NUMBER: _ClassVar[int]
    matches: _containers.RepeatedCompositeFieldContainer[AnchorMatch]
    def __init__(self, matches: _Optional[_Iterable[_Union[AnchorMatch, _Mapping]]] = ...) -> None: ...

class AnchorMatch(_message.Message):
    __slots__ = ("target", "score")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    target: AnchorTarget
    score: float
    def __init__(self, target: _Optional[_Union[AnchorTarget, _Mapping]] = ..., score: _Optional[float] = ...) -> None: ...

class RerankRequest(_message.Message):
    __slots__ = ("query", "passages")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    PASSAGES_FIELD_NUMBER: _ClassVar[int]
    query: str
    passages: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, query: _Optional[str] = ..., passages: _Optional[_Iterable[str]] = ...) -> None: ...

class RerankResponse(_message.Message):
    __slots__ = ("scores", "model_id", "cost")
    SCORES_FIELD_NUMBER: _ClassVar[int]
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    scores: _containers.RepeatedScalarFieldContainer[float]
    model_id: str
    cost: _common_pb2.Cost
    def __init__(self, scores: _Optional[_Iterable[float]] = ..., model_id: _Optional[str] = ..., cost: _Optional[_Union[_common_pb2.Cost, _Mapping]] = ...) -> None: ...
