"""What the use cases need from the outside world: blob rows and blob bytes.

The per-hash lock is the heart of the GC-versus-upload protocol (see ``usecases``): every change
to a hash's row, and every placement or removal of that hash's file, happens inside
``BlobRepository.locked(hash)``, one transaction holding a lock on that hash.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import timedelta
from typing import Protocol

from knowledge_content_index.domain.identity import ContentHash, ContentHasher
from knowledge_content_index.domain.model import (
    Blob,
    BlobKey,
    BlobReference,
    ContentListing,
    NewBlob,
    ReferenceCounts,
)


class LockedHash(Protocol):
    """One transaction holding the lock of one content hash (and, once found, its row's lock)."""

    async def find(self) -> Blob | None:
        """The hash's row, locked until the transaction ends; None when there is none."""

    async def insert(self, blob: NewBlob, tenant: str) -> tuple[Blob, bool]:
        """Insert-or-find the hash's row, record ``tenant`` as a writer; True when inserted now."""

    async def seen_by(self, blob_id: int, tenant: str) -> bool:
        """Whether ``tenant`` already wrote or references the blob (what it may be told about it)."""

    async def touch(self, blob_id: int, tenant: str) -> None:
        """Restart the blob's grace period (a write just used it) and record the writer."""

    async def repoint(self, blob_id: int, storage_uri: str, tenant: str) -> Blob:
        """Heal: the row now names ``storage_uri``; touches it and records the writer."""

    async def move(self, blob_id: int, storage_uri: str) -> None:
        """The row now names ``storage_uri``, the same bytes in another store; nothing else changes."""

    async def delete_if_collectable(self, blob_id: int, min_age: timedelta) -> Blob | None:
        """Delete the row if it still has no reference and was last written over ``min_age`` ago.

        Returns the deleted row, or None when it was kept (or is gone). Raises BlobInUse when the
        database refuses because something references it after all.
        """


class BlobRepository(Protocol):
    def locked(self, content_hash: ContentHash) -> AbstractAsyncContextManager[LockedHash]:
        """A transaction holding the hash's lock; committed when the block ends without error."""

    def locked_all(self, content_hashes: Sequence[ContentHash]) -> AbstractAsyncContextManager[Sequence[LockedHash]]:
        """One transaction holding every listed hash's lock, in the order given back.

        The locks are taken in one global order, so two callers holding several never deadlock.
        """

    async def tenant_isolates_content(self, tenant: str) -> bool:
        """``tenants.isolate_content``; a tenant without a row does not isolate."""

    async def peek(self, content_hash: ContentHash) -> Blob | None:
        """The hash's row without any lock (a hint; decisions are taken under ``locked``)."""

    async def peek_digests(self, digests: Sequence[str]) -> list[Blob]:
        """Rows whose hash has one of these digests, in either scheme, without any lock (a hint)."""

    async def visible(self, blob_id: int, tenant: str) -> Blob | None:
        """The blob if ``tenant`` wrote or references it, else None."""

    async def visible_by_hash(self, content_hash: ContentHash, tenant: str) -> Blob | None:
        """The hash's blob if ``tenant`` wrote or references it, else None."""

    async def count_references(self, blob_id: int, tenant: str) -> ReferenceCounts:
        """``tenant``'s live references across every referencing table, computed now."""

    async def tenant_references(self, blob_id: int, tenant: str) -> list[BlobReference]:
        """``tenant``'s entities that reference the blob, oldest first."""

    async def collectable(self, min_age: timedelta, limit: int | None) -> list[Blob]:
        """Candidates for GC: unreferenced, last written over ``min_age`` ago, oldest id first."""

    async def rows_after(self, blob_id: int, limit: int) -> list[Blob]:
        """Up to ``limit`` rows whose id follows ``blob_id``, in id order, without any lock."""

    async def writers(self, blob_id: int) -> list[str]:
        """The tenants that wrote the blob, first writer first."""


class StagedBlob(Protocol):
    """Bytes being received into a private temporary location."""

    async def write(self, chunk: bytes) -> None:
        """Append ``chunk`` (large chunks are written off the event loop)."""

    async def seal(self) -> None:
        """Make the bytes durable (fsync) and close the temporary file."""

    async def discard(self) -> None:
        """Remove the temporary bytes; idempotent, and harmless after ``place``."""


class BlobReader(Protocol):
    def chunks(self) -> AsyncGenerator[bytes, None]:
        """The requested range, in order."""

    async def close(self) -> None:
        """Release the open file."""


class BlobStorage(Protocol):
    def uri_for(self, key: BlobKey) -> str:
        """The storage URI of ``key``."""

    def key_for(self, storage_uri: str) -> BlobKey | None:
        """The key of a URI this storage manages, or None for any other URI (never trusted)."""

    def stage(self) -> AbstractAsyncContextManager[StagedBlob]:
        """A new staged blob, discarded when the block ends (a no-op once placed)."""

    async def prepare(self, staged: StagedBlob, key: BlobKey, hasher: Callable[[], ContentHasher]) -> None:
        """The slow part of placing sealed staged bytes on ``key``, done before the hash's lock is
        taken: nothing where placing is a rename; an object store's whole upload, completed only
        when the bytes sent hash (a fresh ``hasher()``) to ``key``'s digest. What it leaves on
        ``key`` without a row is an orphan like any other (young, so no sweep takes it yet)."""

    async def place(self, staged: StagedBlob, key: BlobKey, hasher: Callable[[], ContentHasher]) -> str:
        """Under the hash's lock: make ``key`` hold the sealed staged bytes, whole or not at all
        (a rename, or a check that what ``prepare`` uploaded is still there, else the upload
        again); returns its URI."""

    async def size_of(self, storage_uri: str) -> int | None:
        """Size of the bytes at ``storage_uri``, or None when missing or not managed here."""

    async def digest(self, storage_uri: str, update: Callable[[bytes], None]) -> int | None:
        """Feed the bytes at ``storage_uri`` to ``update`` (off the event loop); their size, or None when missing."""

    async def open(self, storage_uri: str, offset: int, limit: int, chunk_bytes: int) -> BlobReader:
        """An open reader of ``limit`` bytes from ``offset``; raises BlobContentMissing when absent."""

    async def delete(self, storage_uri: str) -> bool:
        """Remove the bytes at ``storage_uri``; False when there were none (or not managed here)."""

    async def sweep_staging(self, older_than: timedelta) -> int:
        """Remove staged leftovers of crashed processes older than ``older_than``; their number."""

    async def list_content(self, after: BlobKey | None, limit: int) -> ContentListing:
        """At most ``limit`` files on content paths whose key follows ``after``, in key order (off
        the event loop). Nothing else is listed by name, followed or touched; only counted."""

    async def remove_if_older(self, storage_uri: str, older_than: timedelta) -> int | None:
        """Remove the plain file at a content path if last modified over ``older_than`` ago.

        Returns its size, or None when it was kept, missing, or not a plain file managed here.
        """
