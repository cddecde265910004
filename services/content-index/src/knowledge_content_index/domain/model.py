"""Blobs and what the use cases exchange about them: frozen values."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from knowledge_content_index.domain.errors import InvalidBlobRequest
from knowledge_content_index.domain.identity import ContentHash
from knowledge_content_index.domain.naming import EXTENSIONS, normalise_mime_type, safe_extension

_FILE_NAME = re.compile(r"(?P<digest>[0-9a-f]{64})(?P<extension>\.[a-z0-9]{1,10})?")


@dataclass(frozen=True, slots=True)
class Blob:
    blob_id: int
    content_hash: ContentHash
    size_bytes: int
    storage_uri: str
    mime_type: str
    create_time: datetime


@dataclass(frozen=True, slots=True)
class BlobKey:
    """Where storage keeps a blob's bytes: the hash's digest plus a whitelisted extension."""

    digest: str
    extension: str = ""

    @property
    def path(self) -> str:
        """``<hex[:2]>/<hex><ext>``: where every store keeps it, under its root or prefix."""
        return f"{self.digest[:2]}/{self.digest}{self.extension}"

    @classmethod
    def of_path(cls, shard: str, name: str) -> BlobKey | None:
        """The key of the content path ``<shard>/<name>``, or None when that is no content path."""
        match = _FILE_NAME.fullmatch(name)
        if match is None:
            return None
        digest, extension = match["digest"], match["extension"] or ""
        if shard != digest[:2] or (extension and extension[1:] not in EXTENSIONS):
            return None
        return cls(digest, extension)


@dataclass(frozen=True, slots=True)
class StoredFile:
    """A file on a content path as a listing saw it: a hint, decided on under its hash's lock."""

    key: BlobKey
    storage_uri: str
    size_bytes: int
    modify_time: datetime


@dataclass(frozen=True, slots=True)
class ContentListing:
    """One bounded stretch of the content paths, in key order."""

    files: tuple[StoredFile, ...]
    # Entries that are not content files (other names, links, directories): never touched.
    stray_count: int
    # True when the walk reached the last content path (the next stretch starts over).
    complete: bool


@dataclass(frozen=True, slots=True)
class NewBlob:
    content_hash: ContentHash
    size_bytes: int
    mime_type: str
    storage_uri: str


@dataclass(frozen=True, slots=True)
class UploadHeader:
    """What opens a WriteBlob stream, already sanitised (see ``domain.naming``)."""

    extension: str
    mime_type: str
    expected_size_bytes: int = 0

    @classmethod
    def parse(cls, filename: str, mime_type: str, expected_size_bytes: int) -> UploadHeader:
        if expected_size_bytes < 0:
            raise InvalidBlobRequest("expected_size_bytes must not be negative", field="expected_size_bytes")
        return cls(safe_extension(filename, mime_type), normalise_mime_type(mime_type), expected_size_bytes)


@dataclass(frozen=True, slots=True)
class Ensured:
    """The row a write or ensure settled on."""

    blob: Blob
    already_existed: bool
    healed: bool = False


@dataclass(frozen=True, slots=True)
class BlobReference:
    entity_type: str
    entity_id: str
    corpus_id: int | None
    create_time: datetime


@dataclass(frozen=True, slots=True)
class ReferenceCounts:
    """Live references per entity type (every referencing type, zeros included)."""

    by_entity_type: tuple[tuple[str, int], ...]

    @property
    def total(self) -> int:
        return sum(count for _, count in self.by_entity_type)


@dataclass(frozen=True, slots=True)
class GarbageReport:
    removed_count: int
    freed_bytes: int
    removed_blob_ids: tuple[int, ...]
    skipped_count: int
    # Files on content paths that no row names (see ``usecases``), and their bytes.
    orphan_removed_count: int
    orphan_freed_bytes: int
