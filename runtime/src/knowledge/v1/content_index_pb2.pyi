import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Blob(_message.Message):
    __slots__ = ("blob_id", "content_hash", "size_bytes", "storage_uri", "mime_type", "create_time")
    BLOB_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    STORAGE_URI_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    blob_id: str
    content_hash: str
    size_bytes: int
    storage_uri: str
    mime_type: str
    create_time: _timestamp_pb2.Timestamp
    def __init__(self, blob_id: _Optional[str] = ..., content_hash: _Optional[str] = ..., size_bytes: _Optional[int] = ..., storage_uri: _Optional[str] = ..., mime_type: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class WriteBlobRequest(_message.Message):
    __slots__ = ("header", "chunk")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    header: WriteBlobHeader
    chunk: bytes
    def __init__(self, header: _Optional[_Union[WriteBlobHeader, _Mapping]] = ..., chunk: _Optional[bytes] = ...) -> None: ...

class WriteBlobHeader(_message.Message):
    __slots__ = ("filename", "mime_type", "expected_size_bytes")
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    filename: str
    mime_type: str
    expected_size_bytes: int
    def __init__(self, filename: _Optional[str] = ..., mime_type: _Optional[str] = ..., expected_size_bytes: _Optional[int] = ...) -> None: ...

class WriteBlobResponse(_message.Message):
    __slots__ = ("blob", "already_existed")
    BLOB_FIELD_NUMBER: _ClassVar[int]
    ALREADY_EXISTED_FIELD_NUMBER: _ClassVar[int]
    blob: Blob
    already_existed: bool
    def __init__(self, blob: _Optional[_Union[Blob, _Mapping]] = ..., already_existed: _Optional[bool] = ...) -> None: ...

class EnsureBlobRequest(_message.Message):
    __slots__ = ("content_hash", "storage_uri", "size_bytes", "mime_type")
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    STORAGE_URI_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    content_hash: str
    storage_uri: str
    size_bytes: int
    mime_type: str
    def __init__(self, content_hash: _Optional[str] = ..., storage_uri: _Optional[str] = ..., size_bytes: _Optional[int] = ..., mime_type: _Optional[str] = ...) -> None: ...

class EnsureBlobResponse(_message.Message):
    __slots__ = ("blob", "already_existed", "healed")
    BLOB_FIELD_NUMBER: _ClassVar[int]
    ALREADY_EXISTED_FIELD_NUMBER: _ClassVar[int]
    HEALED_FIELD_NUMBER: _ClassVar[int]
    blob: Blob
    already_existed: bool
    healed: bool
    def __init__(self, blob: _Optional[_Union[Blob, _Mapping]] = ..., already_existed: _Optional[bool] = ..., healed: _Optional[bool] = ...) -> None: ...

class ReadBlobRequest(_message.Message):
    __slots__ = ("blob_id", "offset", "limit")
    BLOB_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    blob_id: str
    offset: int
    limit: int
    def __init__(self, blob_id: _Optional[str] = ..., offset: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class ReadBlobResponse(_message.Message):
    __slots__ = ("blob", "chunk")
    BLOB_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    blob: Blob
    chunk: bytes
    def __init__(self, blob: _Optional[_Union[Blob, _Mapping]] = ..., chunk: _Optional[bytes] = ...) -> None: ...

class StatBlobRequest(_message.Message):
    __slots__ = ("blob_id",)
    BLOB_ID_FIELD_NUMBER: _ClassVar[int]
    blob_id: str
    def __init__(self, blob_id: _Optional[str] = ...) -> None: ...

class StatBlobResponse(_message.Message):
    __slots__ = ("blob", "file_present")
    BLOB_FIELD_NUMBER: _ClassVar[int]
    FILE_PRESENT_FIELD_NUMBER: _ClassVar[int]
    blob: Blob
    file_present: bool
    def __init__(self, blob: _Optional[_Union[Blob, _Mapping]] = ..., file_present: _Optional[bool] = ...) -> None: ...

class CountReferencesRequest(_message.Message):
    __slots__ = ("blob_id",)
    BLOB_ID_FIELD_NUMBER: _ClassVar[int]
    blob_id: str
    def __init__(self, blob_id: _Optional[str] = ...) -> None: ...

class CountReferencesResponse(_message.Message):
    __slots__ = ("total", "by_entity_type")
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    BY_ENTITY_TYPE_FIELD_NUMBER: _ClassVar[int]
    total: int
    by_entity_type: _containers.RepeatedCompositeFieldContainer[ReferenceCount]
    def __init__(self, total: _Optional[int] = ..., by_entity_type: _Optional[_Iterable[_Union[ReferenceCount, _Mapping]]] = ...) -> None: ...

class ReferenceCount(_message.Message):
    __slots__ = ("entity_type", "count")
    ENTITY_TYPE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    entity_type: str
    count: int
    def __init__(self, entity_type: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class FindByHashRequest(_message.Message):
    __slots__ = ("content_hash",)
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    content_hash: str
    def __init__(self, content_hash: _Optional[str] = ...) -> None: ...

class FindByHashResponse(_message.Message):
    __slots__ = ("blob", "references")
    BLOB_FIELD_NUMBER: _ClassVar[int]
    REFERENCES_FIELD_NUMBER: _ClassVar[int]
    blob: Blob
    references: _containers.RepeatedCompositeFieldContainer[BlobReference]
    def __init__(self, blob: _Optional[_Union[Blob, _Mapping]] = ..., references: _Optional[_Iterable[_Union[BlobReference, _Mapping]]] = ...) -> None: ...

class BlobReference(_message.Message):
    __slots__ = ("entity_type", "entity_id", "corpus_id", "create_time")
    ENTITY_TYPE_FIELD_NUMBER: _ClassVar[int]
    ENTITY_ID_FIELD_NUMBER: _ClassVar[int]
    CORPUS_ID_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    entity_type: str
    entity_id: str
    corpus_id: str
    create_time: _timestamp_pb2.Timestamp
    def __init__(self, entity_type: _Optional[str] = ..., entity_id: _Optional[str] = ..., corpus_id: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CollectGarbageRequest(_message.Message):
    __slots__ = ("dry_run", "min_age", "max_blobs")
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    MIN_AGE_FIELD_NUMBER: _ClassVar[int]
    MAX_BLOBS_FIELD_NUMBER: _ClassVar[int]
    dry_run: bool
    min_age: _duration_pb2.Duration
    max_blobs: int
    def __init__(self, dry_run: _Optional[bool] = ..., min_age: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_blobs: _Optional[int] = ...) -> None: ...

class CollectGarbageResponse(_message.Message):
    __slots__ = ("removed_count", "freed_bytes", "removed_blob_ids", "skipped_count", "orphan_removed_count", "orphan_freed_bytes")
    REMOVED_COUNT_FIELD_NUMBER: _ClassVar[int]
    FREED_BYTES_FIELD_NUMBER: _ClassVar[int]
    REMOVED_BLOB_IDS_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_COUNT_FIELD_NUMBER: _ClassVar[int]
    ORPHAN_REMOVED_COUNT_FIELD_NUMBER: _ClassVar[int]
    ORPHAN_FREED_BYTES_FIELD_NUMBER: _ClassVar[int]
    removed_count: int
    freed_bytes: int
    removed_blob_ids: _containers.RepeatedScalarFieldContainer[str]
    skipped_count: int
    orphan_removed_count: int
    orphan_freed_bytes: int
    def __init__(self, removed_count: _Optional[int] = ..., freed_bytes: _Optional[int] = ..., removed_blob_ids: _Optional[_Iterable[str]] = ..., skipped_count: _Optional[int] = ..., orphan_removed_count: _Optional[int] = ..., orphan_freed_bytes: _Optional[int] = ...) -> None: ...

class ImportFileRequest(_message.Message):
    __slots__ = ("path", "mime_type")
    PATH_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    path: str
    mime_type: str
    def __init__(self, path: _Optional[str] = ..., mime_type: _Optional[str] = ...) -> None: ...

class ImportFileResponse(_message.Message):
    __slots__ = ("blob", "already_existed", "resolved_path")
    BLOB_FIELD_NUMBER: _ClassVar[int]
    ALREADY_EXISTED_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_PATH_FIELD_NUMBER: _ClassVar[int]
    blob: Blob
    already_existed: bool
    resolved_path: str
    def __init__(self, blob: _Optional[_Union[Blob, _Mapping]] = ..., already_existed: _Optional[bool] = ..., resolved_path: _Optional[str] = ...) -> None: ...
