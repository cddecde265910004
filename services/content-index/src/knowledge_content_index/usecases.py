"""Content-index use cases: what a caller can ask, independent of gRPC, PostgreSQL and disks.

Why uploads and garbage collection can never lose a blob
--------------------------------------------------------
Every change to a hash's row and every placement or removal of its file happens inside
``BlobRepository.locked(hash)``: one transaction holding that hash's lock.

- An upload streams into a private staged file while hashing, seals it (fsync), then, holding
  the lock: when the row exists and its file is present it only restarts the row's grace period
  (the staged bytes are dropped: the file is written once); otherwise it moves the staged file
  onto the content path (atomic ``os.replace``) and inserts the row, or heals the row to name
  it, and commits. A row therefore never becomes visible before its file exists. An object
  store cannot rename: its slow upload onto the content key runs before the lock is taken
  (``BlobStorage.prepare``, when a peek finds no row holding the bytes), and placing under the
  lock only checks that the object is still there (GC may have removed it meanwhile, under
  the lock) or uploads it again. An object so uploaded that no row ends up naming is an orphan.
- GC lists candidates (no reference, last written over the grace period ago), then per blob:
  (1) holding the lock, locks the row ``FOR UPDATE``, re-checks both conditions in a fresh
  statement and deletes the row, commit; (2) holding the lock again, removes the file unless a
  row for the hash (re-created meanwhile) names that very path.

An upload that ran before (1) restarted the grace period, so (1) keeps the row; a reference
inserted before (1) is seen by the re-check (its foreign-key lock makes (1) wait); one inserted
after (1) fails on the missing row instead of pointing at nothing. An upload between (1) and (2)
re-creates the row and file, and (2) sees the row and leaves the file; one after (2) writes the
file anew. A crash between (1) and (2) leaves an orphan file, never a row without its bytes.
The grace period must therefore outlast the time between a WriteBlob and the reference its
caller then inserts (hence a configured minimum).

Orphan files
------------
Such a crash, or a commit that fails after an upload placed its file, leaves a file that no row
names. After the blob pass, GC walks a bounded stretch of the content paths (key order, going on
where the previous pass stopped) and, for each file last modified over the grace period ago that
no row of its digest names, takes the locks of both hashes the digest could stand for (a file
name does not say whether it is ``<hex>`` or ``hmac-sha256:<hex>``) in one transaction, re-reads
their rows, and removes the file only if it is still unnamed and still old. An upload of either
hash settles entirely inside its lock, so the sweep sees its row (and keeps the file) or runs
before its placement (which writes the file anew). The age protects what no lock covers: an
EnsureBlob caller stores its file first and asks for the row afterwards. A file is also kept while
a row of its digest names a path outside this storage or lacks its own file (the copy may heal it).

What a tenant is told
---------------------
Tenants that do not isolate content share a blob per SHA-256, but none learns from this service
that another holds the same bytes. A write of bytes whose blob only other tenants have answers as if
it were new to the caller (``already_existed`` and ``healed`` false, the blob's ``create_time`` when
the caller first wrote it); references are counted per tenant. EnsureBlob cannot tell a file the
caller placed from the one the blob's row already names (they are the same content path), so a
tenant that does not see a blob yet may only ensure it with its own copy at another path, which is
verified against the hash before the tenant becomes a writer; naming the row's own file is
NOT_FOUND, like a read of it.
"""

from __future__ import annotations

import asyncio
import os
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import structlog
from knowledge_runtime.auth import Scope
from knowledge_runtime.errors import UploadTooLarge
from knowledge_runtime.imports import ImportRoots, open_fenced
from knowledge_runtime.tracing import tracer

from knowledge_content_index.domain.errors import (
    BlobContentMissing,
    BlobFileMissing,
    BlobInUse,
    BlobNotFound,
    ContentHashMismatch,
    InvalidBlobRequest,
)
from knowledge_content_index.domain.identity import ContentHash, ContentHasher, ContentKeyring
from knowledge_content_index.domain.model import (
    Blob,
    BlobKey,
    BlobReference,
    Ensured,
    GarbageReport,
    NewBlob,
    ReferenceCounts,
    StoredFile,
    UploadHeader,
)
from knowledge_content_index.domain.naming import normalise_mime_type
from knowledge_content_index.domain.ports import BlobReader, BlobRepository, BlobStorage, LockedHash, StagedBlob

log = structlog.get_logger("knowledge.content_index")
_tracer = tracer("knowledge.content_index")

READ_CHUNK_BYTES = 1024 * 1024
HASH_OFFLOAD_BYTES = 64 * 1024
MAX_REPORTED_IDS = 1000
# Staged files of crashed processes are swept once this old (live uploads keep theirs fresh).
STAGING_MAX_AGE = timedelta(days=1)
# Content files one GC pass examines for orphans; the next pass goes on after the last one.
ORPHAN_SCAN_FILES = 10_000


@dataclass(frozen=True, slots=True)
class BlobPolicy:
    max_upload_bytes: int
    gc_grace: timedelta
    gc_min_age: timedelta


@dataclass(frozen=True, slots=True)
class BlobRead:
    blob: Blob
    reader: BlobReader


class BlobUseCases:
    def __init__(
        self,
        blobs: BlobRepository,
        storage: BlobStorage,
        keyring: ContentKeyring,
        policy: BlobPolicy,
        import_roots: ImportRoots | None = None,
    ) -> None:
        self._blobs = blobs
        self._storage = storage
        self._keyring = keyring
        self._policy = policy
        self._import_roots = import_roots or ImportRoots()
        # Where the next orphan sweep starts (per process; None: from the first content path).
        self._orphan_cursor: BlobKey | None = None

    # -- writing ---------------------------------------------------------------------------

    async def write_blob(self, scope: Scope, header: UploadHeader, chunks: AsyncIterator[bytes]) -> Ensured:
        """Stream bytes in; nothing is left behind unless the whole stream arrived and was stored."""
        limit = self._policy.max_upload_bytes
        if header.expected_size_bytes > limit:
            raise UploadTooLarge(limit)
        new_hasher = await self._hasher_of(scope.tenant)
        hasher = new_hasher()
        with _tracer.start_as_current_span("content_index.write"):
            async with self._storage.stage() as staged:
                size = 0
                async for chunk in chunks:
                    size += len(chunk)
                    if size > limit:
                        raise UploadTooLarge(limit)
                    if len(chunk) >= HASH_OFFLOAD_BYTES:
                        await asyncio.to_thread(hasher.update, chunk)
                    else:
                        hasher.update(chunk)
                    await staged.write(chunk)
                await staged.seal()
                content_hash = hasher.finish()
                new = NewBlob(content_hash, size, header.mime_type, "")
                key = BlobKey(content_hash.digest, header.extension)
                ensured = await self._settle_staged(scope.tenant, new, staged, key, new_hasher)
        log.info(
            "blob_written",
            blob_id=ensured.blob.blob_id,
            size_bytes=size,
            already_existed=ensured.already_existed,
            healed=ensured.healed,
        )
        return ensured

    async def import_file(self, scope: Scope, path: str, mime_type: str) -> tuple[Ensured, str]:
        """The file at ``path`` under an import root of the tenant, stored as ``write_blob`` stores
        bytes. This service's own fence: the path is resolved and checked against the roots here,
        whatever the caller checked, and the opened descriptor's real location checked again
        (``knowledge_runtime.imports``) before a byte is read."""
        resolved = self._import_roots.resolve(path, scope.tenant, field="path")
        fd = await asyncio.to_thread(open_fenced, resolved)
        try:
            size = os.fstat(fd).st_size
            header = UploadHeader.parse(resolved.real.name, mime_type, 0)
            if size > self._policy.max_upload_bytes:
                raise UploadTooLarge(self._policy.max_upload_bytes)

            async def chunks() -> AsyncIterator[bytes]:
                while data := await asyncio.to_thread(os.read, fd, READ_CHUNK_BYTES):
                    yield data

            ensured = await self.write_blob(scope, header, chunks())
        finally:
            os.close(fd)
        log.info("file_imported", blob_id=ensured.blob.blob_id, root=resolved.root.name, size_bytes=size)
        return ensured, str(resolved.real)

    async def _settle_staged(
        self, tenant: str, new: NewBlob, staged: StagedBlob, key: BlobKey, hasher: Callable[[], ContentHasher]
    ) -> Ensured:
        hint = await self._blobs.peek(new.content_hash)
        if hint is None or not await self._holds(hint):
            await self._storage.prepare(staged, key, hasher)  # outside the lock: it may take long
        async with self._blobs.locked(new.content_hash) as tx:
            existing = await tx.find()
            seen = existing is not None and await tx.seen_by(existing.blob_id, tenant)
            if existing is not None and await self._holds(existing):
                await tx.touch(existing.blob_id, tenant)
                return _told(Ensured(existing, already_existed=True), seen)
            uri = await self._storage.place(staged, key, hasher)
            try:
                ensured = await self._insert_or_heal(tx, tenant, existing, _with_uri(new, uri))
            except BaseException:
                if existing is None or not self._same_file(existing.storage_uri, uri):
                    await self._storage.delete(uri)  # no committed row names it
                raise
            if not self._same_file(ensured.blob.storage_uri, uri):
                await self._storage.delete(uri)  # a row made without the lock won; ours is redundant
            return _told(ensured, seen)

    async def ensure_blob(
        self, scope: Scope, content_hash_text: str, storage_uri: str, size_bytes: int, mime_type: str
    ) -> Ensured:
        """Insert-or-find the row of a file the caller already stored, healing a row whose file
        vanished. The caller's file is verified against the hash before a row names it."""
        content_hash = _parse_hash(content_hash_text)
        if size_bytes < 0:
            raise InvalidBlobRequest("size_bytes must not be negative", field="size_bytes")
        key = self._storage.key_for(storage_uri)
        if key is None or key.digest != content_hash.digest:
            raise InvalidBlobRequest("storage_uri must be this hash's content path", field="storage_uri")
        isolated = await self._blobs.tenant_isolates_content(scope.tenant)
        if content_hash.keyed != isolated:
            raise InvalidBlobRequest("content_hash is not in the caller tenant's hash scheme", field="content_hash")
        storage_uri = self._storage.uri_for(key)  # one spelling per path, whatever the caller wrote
        new = NewBlob(content_hash, size_bytes, normalise_mime_type(mime_type), storage_uri)
        with _tracer.start_as_current_span("content_index.ensure"):
            # Hash outside the lock when the row will need the caller's file (the usual case).
            hint = await self._blobs.peek(content_hash)
            verified = hint is None or not await self._holds(hint)
            if verified:
                await self._verify(scope.tenant, isolated, new)
            async with self._blobs.locked(content_hash) as tx:
                existing = await tx.find()
                seen = existing is not None and await tx.seen_by(existing.blob_id, scope.tenant)
                if existing is not None and await self._holds(existing):
                    own_copy = not self._same_file(existing.storage_uri, storage_uri)
                    if not seen:
                        if not own_copy:
                            raise BlobNotFound()  # the row's own file proves nothing about the caller
                        if not verified:
                            await self._verify(scope.tenant, isolated, new)  # it holds the bytes itself
                    await tx.touch(existing.blob_id, scope.tenant)
                    if own_copy:
                        await self._storage.delete(storage_uri)  # one file per hash
                    return _told(Ensured(existing, already_existed=True), seen)
                if not verified:
                    await self._verify(scope.tenant, isolated, new)
                elif await self._storage.size_of(storage_uri) != size_bytes:
                    raise BlobFileMissing()
                ensured = await self._insert_or_heal(tx, scope.tenant, existing, new)
                return _told(ensured, seen)

    async def _insert_or_heal(self, tx: LockedHash, tenant: str, existing: Blob | None, new: NewBlob) -> Ensured:
        """Under the hash lock, with ``new``'s file in place: a new row, or the old one repointed."""
        if existing is None:
            blob, inserted = await tx.insert(new, tenant)
            if inserted:
                return Ensured(blob, already_existed=False)
            existing = blob
            if await self._holds(existing):
                await tx.touch(existing.blob_id, tenant)
                return Ensured(existing, already_existed=True)
        healed = await tx.repoint(existing.blob_id, new.storage_uri, tenant)
        log.warning("blob_healed", blob_id=healed.blob_id)
        return Ensured(healed, already_existed=True, healed=True)

    async def _verify(self, tenant: str, isolated: bool, new: NewBlob) -> None:
        hasher = self._keyring.hasher(tenant, isolated=isolated)
        size = await self._storage.digest(new.storage_uri, hasher.update)
        if size is None:
            raise BlobFileMissing()
        if size != new.size_bytes or hasher.finish() != new.content_hash:
            raise ContentHashMismatch()

    # -- reading ---------------------------------------------------------------------------

    async def stat_blob(self, scope: Scope, blob_id: int) -> tuple[Blob, bool]:
        blob = await self._visible(scope, blob_id)
        return blob, await self._holds(blob)

    async def read_blob(self, scope: Scope, blob_id: int, offset: int, limit: int) -> BlobRead:
        blob = await self._visible(scope, blob_id)
        if not 0 <= offset <= blob.size_bytes:
            raise InvalidBlobRequest(f"offset must be within [0, {blob.size_bytes}]", field="offset")
        if limit < 0:
            raise InvalidBlobRequest("limit must not be negative", field="limit")
        remaining = blob.size_bytes - offset
        length = remaining if limit == 0 else min(limit, remaining)
        if not await self._holds(blob):
            raise BlobContentMissing()
        return BlobRead(blob, await self._storage.open(blob.storage_uri, offset, length, READ_CHUNK_BYTES))

    async def count_references(self, scope: Scope, blob_id: int) -> ReferenceCounts:
        blob = await self._visible(scope, blob_id)
        return await self._blobs.count_references(blob.blob_id, scope.tenant)

    async def find_by_hash(self, scope: Scope, content_hash_text: str) -> tuple[Blob | None, list[BlobReference]]:
        blob = await self._blobs.visible_by_hash(_parse_hash(content_hash_text), scope.tenant)
        if blob is None:
            return None, []
        return blob, await self._blobs.tenant_references(blob.blob_id, scope.tenant)

    async def _visible(self, scope: Scope, blob_id: int) -> Blob:
        blob = await self._blobs.visible(blob_id, scope.tenant)
        if blob is None:
            raise BlobNotFound()
        return blob

    # -- garbage collection ----------------------------------------------------------------

    async def collect_garbage(self, min_age: timedelta | None, max_blobs: int, dry_run: bool) -> GarbageReport:
        if min_age is not None and min_age < timedelta(0):
            raise InvalidBlobRequest("min_age must not be negative", field="min_age")
        if max_blobs < 0:
            raise InvalidBlobRequest("max_blobs must not be negative", field="max_blobs")
        age = max(self._policy.gc_grace if min_age is None else min_age, self._policy.gc_min_age)
        with _tracer.start_as_current_span("content_index.gc"):
            candidates = await self._blobs.collectable(age, max_blobs or None)
            if dry_run:
                ids = tuple(c.blob_id for c in candidates)
                orphans, orphan_bytes = await self._collect_orphans(age, max_blobs, dry_run=True)
                return GarbageReport(
                    len(ids), sum(c.size_bytes for c in candidates), ids[:MAX_REPORTED_IDS], 0, orphans, orphan_bytes
                )
            swept = await self._storage.sweep_staging(max(age, STAGING_MAX_AGE))
            removed: list[int] = []
            freed = skipped = 0
            for candidate in candidates:
                outcome = await self._forget(candidate, age)
                if isinstance(outcome, _Gone):
                    continue
                if outcome is None:
                    skipped += 1
                    continue
                removed.append(outcome.blob_id)
                if await self._release(outcome):
                    freed += outcome.size_bytes
            orphans, orphan_bytes = await self._collect_orphans(age, max_blobs, dry_run=False)
        log.info(
            "garbage_collected",
            removed=len(removed),
            freed_bytes=freed,
            skipped=skipped,
            swept_partials=swept,
            orphan_files_removed=orphans,
            orphan_freed_bytes=orphan_bytes,
        )
        return GarbageReport(len(removed), freed, tuple(removed[:MAX_REPORTED_IDS]), skipped, orphans, orphan_bytes)

    async def _forget(self, candidate: Blob, age: timedelta) -> Blob | None | _Gone:
        """Phase 1: the deleted row; None when it is kept (referenced or written since); _GONE when
        another pass already removed it."""
        try:
            async with self._blobs.locked(candidate.content_hash) as tx:
                current = await tx.find()
                if current is None or current.blob_id != candidate.blob_id:
                    return _GONE
                return await tx.delete_if_collectable(candidate.blob_id, age)
        except BlobInUse:
            return None

    async def _release(self, removed: Blob) -> bool:
        """Phase 2: remove the deleted row's file unless a re-created row names the same path."""
        async with self._blobs.locked(removed.content_hash) as tx:
            current = await tx.find()
            if current is not None and self._same_file(current.storage_uri, removed.storage_uri):
                return False
            return await self._storage.delete(removed.storage_uri)

    async def _collect_orphans(self, age: timedelta, max_files: int, dry_run: bool) -> tuple[int, int]:
        """The orphan sweep (see the module docstring): files removed (or that would be) and their
        bytes. A dry run decides without locks and leaves the cursor where it was."""
        with _tracer.start_as_current_span("content_index.gc_orphans"):
            listing = await self._storage.list_content(self._orphan_cursor, ORPHAN_SCAN_FILES)
            if listing.stray_count:
                log.warning("blob_root_strays", count=listing.stray_count)  # by count: names may be anyone's
            rows: defaultdict[str, list[Blob]] = defaultdict(list)
            for row in await self._blobs.peek_digests(sorted({f.key.digest for f in listing.files})):
                rows[row.content_hash.digest].append(row)
            cutoff = datetime.now(UTC) - age
            count = freed = 0
            cursor: BlobKey | None = None
            for file in listing.files:
                if max_files and count >= max_files:
                    break  # the next pass goes on after the last file examined
                cursor = file.key
                if file.modify_time >= cutoff or not await self._orphaned(file, rows[file.key.digest]):
                    continue
                size = file.size_bytes if dry_run else await self._remove_orphan(file, age)
                if size is not None:
                    count += 1
                    freed += size
            else:
                if listing.complete:
                    cursor = None  # the walk reached the end: the next pass starts over
            if not dry_run:
                self._orphan_cursor = cursor
        return count, freed

    async def _remove_orphan(self, file: StoredFile, age: timedelta) -> int | None:
        """The file's size once removed; None when, under its hashes' locks, it is named or young."""
        schemes = [ContentHash(file.key.digest, keyed=False), ContentHash(file.key.digest, keyed=True)]
        async with self._blobs.locked_all(schemes) as held:
            rows = [row for tx in held if (row := await tx.find()) is not None]
            if not await self._orphaned(file, rows):
                return None
            size = await self._storage.remove_if_older(file.storage_uri, age)
        if size is not None:
            log.info("orphan_file_removed", digest=file.key.digest, size_bytes=size)
        return size

    async def _orphaned(self, file: StoredFile, rows: Iterable[Blob]) -> bool:
        """No row of the file's digest names it or may still need it as its only copy."""
        for row in rows:
            named = self._storage.key_for(row.storage_uri)
            if named is None or named == file.key or not await self._holds(row):
                return False
        return True

    # -- helpers ---------------------------------------------------------------------------

    async def _hasher_of(self, tenant: str) -> Callable[[], ContentHasher]:
        """A maker of fresh hashers of the tenant's scheme (storage re-hashes what it uploads)."""
        isolated = await self._blobs.tenant_isolates_content(tenant)
        return lambda: self._keyring.hasher(tenant, isolated=isolated)

    def _same_file(self, first: str, second: str) -> bool:
        """Whether two URIs name the same stored file (compared by key, not by spelling)."""
        key = self._storage.key_for(first)
        return first == second if key is None else key == self._storage.key_for(second)

    async def _holds(self, blob: Blob) -> bool:
        """True when the blob's file is present with its full size."""
        return await self._storage.size_of(blob.storage_uri) == blob.size_bytes


class _Gone:
    """What _forget answers for a row another pass already removed."""


_GONE = _Gone()


def _told(ensured: Ensured, seen: bool) -> Ensured:
    """What the caller learns: all of it for a blob it already had or that this call created; for
    one that only other tenants had, that it is new (no dedup hit, no heal, created now)."""
    if seen or not ensured.already_existed:
        return ensured
    return Ensured(replace(ensured.blob, create_time=datetime.now(UTC)), already_existed=False)


def _with_uri(new: NewBlob, storage_uri: str) -> NewBlob:
    return NewBlob(new.content_hash, new.size_bytes, new.mime_type, storage_uri)


def _parse_hash(text: str) -> ContentHash:
    content_hash = ContentHash.parse(text)
    if content_hash is None:
        raise InvalidBlobRequest(
            "content_hash must be 64 hex characters, or 'hmac-sha256:' and 64 hex characters", field="content_hash"
        )
    return content_hash
