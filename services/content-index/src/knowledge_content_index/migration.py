"""Moving blobs from one store to another (``knowledge blobs migrate``: the filesystem to an
object store), in two steps that are each idempotent and resumable.

- **Copy.** Every row whose bytes are in the source store is copied to the same key in the
  target, unless an object of the row's size is already there. The file is hashed while it is
  read, in the row's own scheme (SHA-256, or for an isolated tenant's blob the HMAC under one of
  its writers' keys), and must match the row; the target then completes its upload only when
  what it sent hashes to the key again (``BlobStorage.prepare``). A row whose file is missing,
  has another size or does not match is reported and left alone. No row changes, so the service
  may keep running on the source meanwhile; run the copy as often as you like.
- **Switch.** After a copy without failures, each row is repointed, under its hash's lock, to its
  object in the target, once that object is there with the row's size. Run it with the service
  stopped, then start the service on the target: a service still on the source would take a
  repointed row's bytes for missing (reads fail, a write copies them back). Nothing is lost either
  way, and the source's files stay where they are until the operator removes them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from functools import partial

import structlog

from knowledge_content_index.domain.errors import BlobContentMissing
from knowledge_content_index.domain.identity import ContentHasher, ContentKeyring
from knowledge_content_index.domain.model import Blob
from knowledge_content_index.domain.ports import BlobRepository, BlobStorage

log = structlog.get_logger("knowledge.content_index")

PAGE_ROWS = 500
READ_CHUNK_BYTES = 1024 * 1024


@dataclass
class MigrationReport:
    rows: int = 0  # rows whose bytes were in the source store when the pass reached them
    copied: int = 0
    copied_bytes: int = 0
    already_there: int = 0  # an object of the row's size was already in the target
    failed: list[int] = field(default_factory=list)  # blob ids: missing, another size, or another hash
    switched: int = 0

    @property
    def complete(self) -> bool:
        return not self.failed


class BlobMigration:
    def __init__(
        self, blobs: BlobRepository, source: BlobStorage, target: BlobStorage, keyring: ContentKeyring
    ) -> None:
        self._blobs = blobs
        self._source = source
        self._target = target
        self._keyring = keyring

    async def copy(self) -> MigrationReport:
        report = MigrationReport()
        after = 0
        while rows := await self._blobs.rows_after(after, PAGE_ROWS):
            for row in rows:
                after = row.blob_id
                if self._source.key_for(row.storage_uri) is not None:
                    await self._copy(row, report)
        log.info(
            "blobs_copied",
            rows=report.rows,
            copied=report.copied,
            copied_bytes=report.copied_bytes,
            already_there=report.already_there,
            failed=len(report.failed),
        )
        return report

    async def switch(self) -> MigrationReport:
        """A copy, then (only when nothing failed) every copied row repointed to the target."""
        report = await self.copy()
        if not report.complete:
            return report
        after = 0
        while rows := await self._blobs.rows_after(after, PAGE_ROWS):
            for row in rows:
                after = row.blob_id
                if self._source.key_for(row.storage_uri) is not None:
                    await self._switch(row, report)
        log.info("blobs_switched", switched=report.switched, failed=len(report.failed))
        return report

    async def _copy(self, row: Blob, report: MigrationReport) -> None:
        report.rows += 1
        key = self._source.key_for(row.storage_uri)
        assert key is not None
        if await self._target.size_of(self._target.uri_for(key)) == row.size_bytes:
            report.already_there += 1
            return
        if await self._source.size_of(row.storage_uri) != row.size_bytes:
            return self._failed(row, report, "missing_or_resized")
        makers = await self._hashers(row)
        try:
            reader = await self._source.open(row.storage_uri, 0, row.size_bytes, READ_CHUNK_BYTES)
        except BlobContentMissing:
            return self._failed(row, report, "missing_or_resized")
        try:
            async with self._target.stage() as staged:
                hashers = [make() for make in makers]
                async with aclosing(reader.chunks()) as chunks:
                    async for chunk in chunks:
                        await asyncio.to_thread(_update_all, hashers, chunk)
                        await staged.write(chunk)
                await staged.seal()
                matching = [
                    make for make, hasher in zip(makers, hashers, strict=True) if hasher.finish() == row.content_hash
                ]
                if not matching:
                    return self._failed(row, report, "hash_mismatch")
                await self._target.prepare(staged, key, matching[0])
        except BlobContentMissing:
            return self._failed(row, report, "missing_or_resized")
        finally:
            await reader.close()
        report.copied += 1
        report.copied_bytes += row.size_bytes

    async def _switch(self, row: Blob, report: MigrationReport) -> None:
        key = self._source.key_for(row.storage_uri)
        assert key is not None
        async with self._blobs.locked(row.content_hash) as tx:
            current = await tx.find()
            if current is None or current.blob_id != row.blob_id or self._source.key_for(current.storage_uri) != key:
                return  # removed or healed meanwhile
            uri = self._target.uri_for(key)
            if await self._target.size_of(uri) != current.size_bytes:
                return self._failed(row, report, "not_copied")  # written since the copy
            await tx.move(current.blob_id, uri)
        report.switched += 1

    async def _hashers(self, row: Blob) -> list[Callable[[], ContentHasher]]:
        """Makers of the hashers that may have produced the row's hash: SHA-256, or each writer's HMAC."""
        if not row.content_hash.keyed:
            return [lambda: self._keyring.hasher("", isolated=False)]
        writers = await self._blobs.writers(row.blob_id)
        return [partial(self._keyring.hasher, tenant, isolated=True) for tenant in writers]

    @staticmethod
    def _failed(row: Blob, report: MigrationReport, why: str) -> None:
        log.warning("blob_not_migrated", blob_id=row.blob_id, why=why)
        report.failed.append(row.blob_id)


def _update_all(hashers: list[ContentHasher], chunk: bytes) -> None:
    for hasher in hashers:
        hasher.update(chunk)
