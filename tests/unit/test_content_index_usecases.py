"""Content-index use cases against an in-memory repository (a fake at the port) and real files."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import os
import time
from collections import defaultdict
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from knowledge_content_index import usecases
from knowledge_content_index.adapters.local_storage import LocalBlobStorage
from knowledge_content_index.domain.errors import (
    BlobInUse,
    BlobNotFound,
    InvalidBlobRequest,
)
from knowledge_content_index.domain.identity import ContentHash, ContentKeyring
from knowledge_content_index.domain.model import Blob, BlobKey, NewBlob, ReferenceCounts, UploadHeader
from knowledge_content_index.usecases import BlobPolicy, BlobUseCases
from knowledge_runtime.auth import Scope
from knowledge_runtime.errors import UploadTooLarge
from structlog.testing import capture_logs

SCOPE = Scope(tenant="t1", capabilities=frozenset())
CAP = 100_000
PDF = UploadHeader(extension=".pdf", mime_type="application/pdf")


class FakeLocked:
    def __init__(self, repo: FakeBlobs, content_hash: ContentHash) -> None:
        self.repo, self.hash = repo, str(content_hash)

    async def find(self) -> Blob | None:
        return self.repo.rows.get(self.hash)

    async def insert(self, new: NewBlob, tenant: str) -> tuple[Blob, bool]:
        if self.repo.fail_insert:
            raise ConnectionError("the database went away")
        if self.hash in self.repo.rows:
            return self.repo.rows[self.hash], False
        blob = Blob(
            next(self.repo.ids), new.content_hash, new.size_bytes, new.storage_uri, new.mime_type, datetime.now(UTC)
        )
        self.repo.rows[self.hash] = blob
        await self.touch(blob.blob_id, tenant)
        return blob, True

    async def seen_by(self, blob_id: int, tenant: str) -> bool:
        return tenant in self.repo.writers[blob_id]

    async def touch(self, blob_id: int, tenant: str) -> None:
        self.repo.touched[blob_id] = datetime.now(UTC)
        self.repo.writers[blob_id].add(tenant)

    async def repoint(self, blob_id: int, storage_uri: str, tenant: str) -> Blob:
        old = self.repo.rows[self.hash]
        self.repo.rows[self.hash] = Blob(
            old.blob_id, old.content_hash, old.size_bytes, storage_uri, old.mime_type, old.create_time
        )
        await self.touch(blob_id, tenant)
        return self.repo.rows[self.hash]

    async def delete_if_collectable(self, blob_id: int, min_age: timedelta) -> Blob | None:
        self.repo.events.append(("delete", blob_id))
        if self.repo.refs[blob_id] and self.repo.raise_in_use:
            raise BlobInUse()
        if self.repo.refs[blob_id] or datetime.now(UTC) - self.repo.touched[blob_id] < min_age:
            return None
        return self.repo.rows.pop(self.hash)


class FakeBlobs:
    """Rows by hash; one asyncio lock per hash stands in for the advisory lock."""

    def __init__(self) -> None:
        self.rows: dict[str, Blob] = {}
        self.ids = itertools.count(1)
        self.locks: dict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self.touched: dict[int, datetime] = {}
        self.writers: dict[int, set[str]] = defaultdict(set)
        self.refs: dict[int, list[str]] = defaultdict(list)
        self.isolated: set[str] = set()
        self.events: list[tuple[str, int]] = []
        self.collect_ages: list[timedelta] = []
        self.locked_together: list[tuple[str, ...]] = []
        self.fail_insert = False
        self.raise_in_use = False

    @asynccontextmanager
    async def locked(self, content_hash: ContentHash):
        async with self.locks[str(content_hash)]:
            yield FakeLocked(self, content_hash)

    @asynccontextmanager
    async def locked_all(self, content_hashes: list[ContentHash]):
        async with AsyncExitStack() as stack:
            for key in sorted({str(h) for h in content_hashes}):
                await stack.enter_async_context(self.locks[key])
            self.locked_together.append(tuple(sorted(str(h) for h in content_hashes)))
            yield [FakeLocked(self, h) for h in content_hashes]

    async def tenant_isolates_content(self, tenant: str) -> bool:
        return tenant in self.isolated

    async def peek(self, content_hash: ContentHash) -> Blob | None:
        return self.rows.get(str(content_hash))

    async def peek_digests(self, digests: list[str]) -> list[Blob]:
        return [blob for blob in self.rows.values() if blob.content_hash.digest in set(digests)]

    async def visible(self, blob_id: int, tenant: str) -> Blob | None:
        return next((b for b in self.rows.values() if b.blob_id == blob_id and tenant in self.writers[blob_id]), None)

    async def visible_by_hash(self, content_hash: ContentHash, tenant: str) -> Blob | None:
        blob = self.rows.get(str(content_hash))
        return blob if blob is not None and tenant in self.writers[blob.blob_id] else None

    async def count_references(self, blob_id: int, tenant: str) -> ReferenceCounts:
        return ReferenceCounts((("document", len(self.refs[blob_id])), ("ingest_job", 0)))

    async def tenant_references(self, blob_id, tenant):
        return []

    async def collectable(self, min_age: timedelta, limit: int | None) -> list[Blob]:
        self.collect_ages.append(min_age)
        now = datetime.now(UTC)
        found = [b for b in self.rows.values() if not self.refs[b.blob_id] and now - self.touched[b.blob_id] >= min_age]
        return sorted(found, key=lambda b: b.blob_id)[:limit]


@pytest.fixture
def repo() -> FakeBlobs:
    return FakeBlobs()


@pytest.fixture
def storage(tmp_path) -> LocalBlobStorage:
    return LocalBlobStorage.create(tmp_path / "blobs")


@pytest.fixture
def cases(repo, storage) -> BlobUseCases:
    policy = BlobPolicy(max_upload_bytes=CAP, gc_grace=timedelta(days=1), gc_min_age=timedelta(hours=1))
    return BlobUseCases(repo, storage, ContentKeyring(os.urandom(32)), policy)


def files(storage: LocalBlobStorage) -> list:
    return sorted(p for p in storage.root.rglob("*") if p.is_file())


async def chunks_of(data: bytes, size: int = 10_000, pulled: list | None = None):
    for start in range(0, len(data), size):
        if pulled is not None:
            pulled.append(start)
        yield data[start : start + size]


def age(repo: FakeBlobs, blob: Blob, by: timedelta = timedelta(days=2)) -> None:
    repo.touched[blob.blob_id] -= by


def backdate(path: Path, by: timedelta = timedelta(days=2)) -> Path:
    """Make a file look last modified ``by`` ago."""
    then = time.time() - by.total_seconds()
    os.utime(path, (then, then))
    return path


def place_orphan(
    storage: LocalBlobStorage,
    data: bytes,
    extension: str = ".pdf",
    digest: str | None = None,
    by: timedelta = timedelta(days=2),
) -> Path:
    """A file on a content path with no row, last modified ``by`` ago."""
    path = storage.path_for(BlobKey(digest or hashlib.sha256(data).hexdigest(), extension))
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    return backdate(path, by)


def stored_path(storage: LocalBlobStorage, blob: Blob) -> Path:
    return storage.path_for(storage.key_for(blob.storage_uri))


async def test_the_cap_stops_reading_at_the_chunk_that_crosses_it(cases, repo, storage):
    pulled: list[int] = []
    with pytest.raises(UploadTooLarge) as caught:
        await cases.write_blob(SCOPE, PDF, chunks_of(os.urandom(CAP * 5), pulled=pulled))
    assert len(pulled) == CAP // 10_000 + 1  # nothing read after the crossing chunk
    assert caught.value.reason == "UPLOAD_TOO_LARGE" and caught.value.code == "RESOURCE_EXHAUSTED"
    assert files(storage) == [] and repo.rows == {}


async def test_a_declared_size_over_the_cap_is_refused_before_reading_or_staging(cases, storage):
    pulled: list[int] = []
    header = UploadHeader(extension="", mime_type="text/plain", expected_size_bytes=CAP + 1)
    with pytest.raises(UploadTooLarge):
        await cases.write_blob(SCOPE, header, chunks_of(b"x", pulled=pulled))
    assert pulled == [] and files(storage) == []


async def test_a_stream_that_breaks_leaves_nothing(cases, repo, storage):
    async def broken():
        yield b"x" * 70_000
        raise ConnectionResetError("client went away")

    with pytest.raises(ConnectionResetError):
        await cases.write_blob(SCOPE, PDF, broken())
    assert files(storage) == [] and repo.rows == {}


async def test_the_same_bytes_under_another_name_are_not_written_twice(cases, repo, storage):
    data = os.urandom(5000)
    first = await cases.write_blob(SCOPE, PDF, chunks_of(data))
    second = await cases.write_blob(Scope("t2", frozenset()), UploadHeader(".txt", "text/plain"), chunks_of(data))
    assert not second.already_existed and second.blob.blob_id == first.blob.blob_id  # t2 never had it
    assert [p.name for p in files(storage)] == [f"{hashlib.sha256(data).hexdigest()}.pdf"]
    assert repo.writers[first.blob.blob_id] == {"t1", "t2"}


async def test_a_row_whose_file_vanished_is_healed_onto_the_new_path(cases, repo, storage):
    data = os.urandom(5000)
    first = await cases.write_blob(SCOPE, PDF, chunks_of(data))
    files(storage)[0].unlink()
    again = await cases.write_blob(SCOPE, UploadHeader(".txt", "text/plain"), chunks_of(data))
    assert again.healed and again.already_existed and again.blob.blob_id == first.blob.blob_id
    assert again.blob.storage_uri.endswith(".txt") and await storage.size_of(again.blob.storage_uri) == 5000


async def test_a_failed_insert_removes_the_file_it_had_placed(cases, repo, storage):
    repo.fail_insert = True
    with pytest.raises(ConnectionError):
        await cases.write_blob(SCOPE, PDF, chunks_of(os.urandom(5000)))
    assert files(storage) == [] and repo.rows == {}


async def test_isolated_tenants_hash_with_their_own_key(cases, repo):
    repo.isolated.add("secret")
    data = os.urandom(100)
    mine = await cases.write_blob(Scope("secret", frozenset()), PDF, chunks_of(data))
    shared = await cases.write_blob(SCOPE, PDF, chunks_of(data))
    assert mine.blob.content_hash.keyed and not shared.blob.content_hash.keyed
    assert mine.blob.blob_id != shared.blob.blob_id and not shared.already_existed


async def test_a_dedup_hit_on_another_tenants_blob_tells_the_caller_nothing(cases, repo, storage):
    data = os.urandom(5000)
    first = await cases.write_blob(SCOPE, PDF, chunks_of(data))
    await asyncio.sleep(0.01)
    other = await cases.write_blob(Scope("t2", frozenset()), PDF, chunks_of(data))
    assert other.blob.blob_id == first.blob.blob_id and len(files(storage)) == 1  # still stored once
    assert not other.already_existed and not other.healed
    assert other.blob.create_time > first.blob.create_time  # not when t1 stored it
    again = await cases.write_blob(Scope("t2", frozenset()), PDF, chunks_of(data))
    assert again.already_existed  # its own second write is a dedup hit it may know of


async def test_gc_removes_the_row_before_the_file_and_spares_a_recreated_path(cases, repo, storage):
    data = os.urandom(5000)
    old = (await cases.write_blob(SCOPE, PDF, chunks_of(data))).blob
    age(repo, old)
    original_release = cases._release

    async def release_after_a_new_upload(removed):
        assert repo.events == [("delete", old.blob_id)] and str(old.content_hash) not in repo.rows
        await cases.write_blob(SCOPE, PDF, chunks_of(data))  # same bytes, same path, new row
        return await original_release(removed)

    cases._release = release_after_a_new_upload
    report = await cases.collect_garbage(None, 0, dry_run=False)
    assert report.removed_blob_ids == (old.blob_id,) and report.freed_bytes == 0
    assert len(files(storage)) == 1 and repo.rows[str(old.content_hash)].blob_id != old.blob_id


async def test_gc_keeps_referenced_recent_and_in_use_blobs(cases, repo, storage):
    referenced, _recent, in_use, orphan = [
        (await cases.write_blob(SCOPE, PDF, chunks_of(os.urandom(1000 + i)))).blob for i in range(4)
    ]
    for blob in (referenced, in_use, orphan):
        age(repo, blob)
    repo.refs[referenced.blob_id].append("document")
    report = await cases.collect_garbage(None, 0, dry_run=True)
    assert report.removed_blob_ids == (in_use.blob_id, orphan.blob_id) and len(files(storage)) == 4

    original = repo.collectable

    async def stale_candidates(min_age, limit):  # the listing missed a reference made since
        found = await original(min_age, limit)
        repo.refs[in_use.blob_id].append("document")
        return found

    repo.collectable = stale_candidates
    repo.raise_in_use = True
    report = await cases.collect_garbage(None, 0, dry_run=False)
    assert report.removed_blob_ids == (orphan.blob_id,) and report.skipped_count == 1
    assert report.freed_bytes == orphan.size_bytes and len(files(storage)) == 3


async def test_gc_ages_default_and_are_floored(cases, repo):
    await cases.collect_garbage(None, 0, dry_run=True)
    await cases.collect_garbage(timedelta(seconds=5), 0, dry_run=True)
    await cases.collect_garbage(timedelta(days=3), 0, dry_run=True)
    assert repo.collect_ages == [timedelta(days=1), timedelta(hours=1), timedelta(days=3)]
    for min_age, max_blobs in [(timedelta(seconds=-1), 0), (None, -1)]:
        with pytest.raises(InvalidBlobRequest):
            await cases.collect_garbage(min_age, max_blobs, dry_run=True)


async def test_reads_check_visibility_then_range(cases, repo):
    blob = (await cases.write_blob(SCOPE, PDF, chunks_of(b"0123456789"))).blob
    with pytest.raises(BlobNotFound):
        await cases.read_blob(Scope("stranger", frozenset()), blob.blob_id, 0, 0)
    for offset, limit, field in [(-1, 0, "offset"), (11, 0, "offset"), (0, -1, "limit")]:
        with pytest.raises(InvalidBlobRequest) as caught:
            await cases.read_blob(SCOPE, blob.blob_id, offset, limit)
        assert caught.value.metadata["field"] == field
    read = await cases.read_blob(SCOPE, blob.blob_id, 3, 4)
    assert b"".join([c async for c in read.reader.chunks()]) == b"3456"
    await read.reader.close()


async def test_gc_removes_old_orphan_files_and_leaves_young_named_and_stray_ones(cases, repo, storage):
    named = (await cases.write_blob(SCOPE, PDF, chunks_of(os.urandom(3000)))).blob
    backdate(stored_path(storage, named))  # an old file, but its (recent) row names it
    old = place_orphan(storage, os.urandom(1234))
    young = place_orphan(storage, os.urandom(200), by=timedelta(minutes=5))
    strays = [
        storage.root / "README",
        storage.root / old.parent.name / "notes from a client.pdf",
        storage.root / old.parent.name / (old.stem + ".PDF"),
        storage.root / old.parent.name / (old.stem + ".exe"),
    ]
    for stray in strays:
        stray.write_bytes(b"not a blob")
        backdate(stray)
    link = storage.root / young.parent.name / (hashlib.sha256(b"link").hexdigest() + ".pdf")
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(old)  # a content name, but no plain file: never followed or removed
    expected = sorted(files(storage)) + [link]

    dry = await cases.collect_garbage(None, 0, dry_run=True)
    assert (dry.orphan_removed_count, dry.orphan_freed_bytes) == (1, 1234) and dry.removed_count == 0
    assert sorted(files(storage)) + [link] == expected

    with capture_logs() as logs:
        report = await cases.collect_garbage(None, 0, dry_run=False)
    assert (report.orphan_removed_count, report.orphan_freed_bytes) == (1, 1234)
    assert report.removed_count == 0 and report.freed_bytes == 0
    assert not old.exists() and young.exists() and link.is_symlink()
    assert all(stray.read_bytes() == b"not a blob" for stray in strays)
    assert await storage.size_of(named.storage_uri) == 3000
    stray_logs = [entry for entry in logs if entry["event"] == "blob_root_strays"]
    assert stray_logs == [{"event": "blob_root_strays", "count": 5, "log_level": "warning"}]
    summary = next(entry for entry in logs if entry["event"] == "garbage_collected")
    assert summary["orphan_files_removed"] == 1 and summary["orphan_freed_bytes"] == 1234
    assert "notes from" not in repr(logs)  # strays are counted, never named


async def test_a_copy_beside_a_rows_file_is_an_orphan_unless_the_row_lacks_its_own(cases, repo, storage):
    present = (await cases.write_blob(SCOPE, PDF, chunks_of(os.urandom(1000)))).blob
    copy = place_orphan(storage, b"x" * 10, ".txt", digest=present.content_hash.digest)
    missing = (await cases.write_blob(SCOPE, PDF, chunks_of(os.urandom(1001)))).blob
    stored_path(storage, missing).unlink()
    healer = place_orphan(storage, b"y" * 10, ".txt", digest=missing.content_hash.digest)
    repo.isolated.add("secret")
    keyed = (await cases.write_blob(Scope("secret", frozenset()), PDF, chunks_of(os.urandom(1002)))).blob
    backdate(stored_path(storage, keyed))

    report = await cases.collect_garbage(None, 0, dry_run=False)
    assert report.orphan_removed_count == 1 and not copy.exists()
    assert healer.exists(), "the only copy of a row's bytes must stay (it can heal the row)"
    assert stored_path(storage, keyed).exists(), "a file named by an isolated tenant's row is not an orphan"
    digest = present.content_hash.digest
    assert (digest, f"hmac-sha256:{digest}") in repo.locked_together  # both schemes, one step


async def test_the_sweep_decides_again_under_the_lock(cases, repo, storage):
    data = os.urandom(4000)
    orphan = place_orphan(storage, data)
    original = repo.peek_digests
    settled: list[Blob] = []

    async def an_upload_lands_after_the_listing(digests):
        found = await original(digests)
        settled.append((await cases.write_blob(SCOPE, PDF, chunks_of(data))).blob)
        backdate(orphan)  # only the row, read under the lock, can keep it now
        return found

    repo.peek_digests = an_upload_lands_after_the_listing
    report = await cases.collect_garbage(None, 0, dry_run=False)
    assert report.orphan_removed_count == 0
    assert settled[0].storage_uri == orphan.as_uri() and orphan.read_bytes() == data


async def test_the_orphan_sweep_is_bounded_resumes_and_honours_max_blobs(cases, storage, monkeypatch):
    monkeypatch.setattr(usecases, "ORPHAN_SCAN_FILES", 2)
    orphans = sorted((place_orphan(storage, os.urandom(100 + i)) for i in range(5)), key=lambda p: p.name)
    remaining = list(orphans)

    async def sweep(max_blobs: int = 0) -> list[Path]:
        report = await cases.collect_garbage(None, max_blobs, dry_run=False)
        gone = [p for p in remaining if not p.exists()]
        assert report.orphan_removed_count == len(gone)
        for path in gone:
            remaining.remove(path)
        return gone

    assert await sweep(max_blobs=1) == orphans[:1]
    dry = await cases.collect_garbage(None, 0, dry_run=True)  # the next stretch; it must not skip it
    assert dry.orphan_removed_count == 2 and remaining == orphans[1:] and all(p.exists() for p in remaining)
    assert await sweep() == orphans[1:3]
    assert await sweep() == orphans[3:5]
    assert await sweep() == []  # the walk reached the end: the next pass starts over
    late = place_orphan(storage, b"late")
    remaining.append(late)
    assert await sweep() == [late]
