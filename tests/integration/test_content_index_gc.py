"""Garbage collection against concurrent uploads, on real PostgreSQL and real files.

The deterministic tests stop GC or an upload at each boundary of the protocol described in
``knowledge_content_index.usecases`` and run the other side in between; the race tests run both
at full speed many times. A blob an upload returned must always keep its row and its bytes, and
the orphan-file sweep removes only files no row names.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from datetime import timedelta
from pathlib import Path

import asyncpg
import pytest
from google.protobuf.duration_pb2 import Duration
from knowledge.v1 import content_index_pb2 as pb
from knowledge_content_index.adapters.postgres import NON_REFERENCING_TABLES, REFERENCING_TABLES
from knowledge_content_index.domain.model import Blob, BlobKey, UploadHeader
from knowledge_content_index.usecases import BlobUseCases
from knowledge_runtime.auth import Scope

from tests.support.content_index import (
    GRACE,
    age,
    build_cases,
    eventually,
    files_under,
    read_all,
    reference,
    running_content_index,
    sha256_hex,
    unique_bytes,
    write,
)
from tests.support.rpc import auth

pytestmark = pytest.mark.integration

SCOPE = Scope(tenant="gc-tenant", capabilities=frozenset({"blob.write", "blob.read", "blob.admin"}))
ISOLATED = Scope(tenant="gc-isolated-tenant", capabilities=SCOPE.capabilities)
HEADER = UploadHeader(extension=".pdf", mime_type="application/pdf")


class Gated(BlobUseCases):
    """GC that can be held, for the blob ``target``, at its protocol boundaries: before phase 1
    (row deletion) and between phase 1 and phase 2 (file removal)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.target: int | None = None
        self.at_forget, self.resume_forget = asyncio.Event(), asyncio.Event()
        self.at_release, self.resume_release = asyncio.Event(), asyncio.Event()
        self.resume_forget.set()
        self.resume_release.set()

    async def _forget(self, candidate, age):
        if candidate.blob_id == self.target:
            self.at_forget.set()
            await self.resume_forget.wait()
        return await super()._forget(candidate, age)

    async def _release(self, removed):
        if removed.blob_id == self.target:
            self.at_release.set()
            await self.resume_release.wait()
        return await super()._release(removed)


@pytest.fixture
def gated(content_db, tmp_path) -> Gated:
    return build_cases(content_db, tmp_path / "blobs", os.urandom(32), cls=Gated)


async def chunks_of(data: bytes, hold: asyncio.Event | None = None):
    for start in range(0, len(data), 64 * 1024):
        yield data[start : start + 64 * 1024]
    if hold is not None:
        await hold.wait()  # the upload is fully staged but not yet settled


async def upload(cases: BlobUseCases, data: bytes, hold: asyncio.Event | None = None, scope: Scope = SCOPE):
    return await cases.write_blob(scope, HEADER, chunks_of(data, hold))


async def row(admin: asyncpg.Connection, blob_id: int):
    return await admin.fetchrow("SELECT * FROM content_blobs WHERE blob_id = $1", blob_id)


async def assert_intact(cases: BlobUseCases, blob: Blob, data: bytes, scope: Scope = SCOPE) -> None:
    """The blob's row exists and its file holds exactly ``data``."""
    _stored, present = await cases.stat_blob(scope, blob.blob_id)
    assert present, "a blob an upload returned lost its file"
    read = await cases.read_blob(scope, blob.blob_id, 0, 0)
    try:
        assert b"".join([chunk async for chunk in read.reader.chunks()]) == data
    finally:
        await read.reader.close()


def backdate(path: Path, by: timedelta = timedelta(days=2)) -> Path:
    """Make a file look last modified ``by`` ago."""
    then = time.time() - by.total_seconds()
    os.utime(path, (then, then))
    return path


def content_path(cases: BlobUseCases, data: bytes, scope: Scope = SCOPE, *, isolated: bool = False) -> Path:
    """Where an upload of ``data`` by ``scope`` (HEADER's extension) puts its file."""
    hasher = cases._keyring.hasher(scope.tenant, isolated=isolated)
    hasher.update(data)
    return cases._storage.path_for(BlobKey(hasher.finish().digest, HEADER.extension))


def orphan_file(
    cases: BlobUseCases, data: bytes, scope: Scope = SCOPE, *, isolated: bool = False, by: timedelta = timedelta(days=2)
) -> Path:
    """A file on the content path of ``data`` that no row names, last modified ``by`` ago."""
    path = content_path(cases, data, scope, isolated=isolated)
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    return backdate(path, by)


async def isolate(admin, tenant: str) -> None:
    await admin.execute(
        "INSERT INTO tenants (tenant_id, isolate_content) VALUES ($1, true) "
        "ON CONFLICT (tenant_id) DO UPDATE SET isolate_content = true",
        tenant,
    )


async def waiting_for_a_lock(admin) -> bool:
    return bool(await admin.fetchval("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"))


async def eventually_async(predicate, message: str, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(message)
        await asyncio.sleep(0.02)


async def old_orphan(cases: BlobUseCases, admin, data: bytes) -> Blob:
    """An unreferenced blob old enough for GC; ``cases`` (when Gated) will hold GC at it."""
    blob = (await upload(cases, data)).blob
    await age(admin, blob.blob_id)
    if isinstance(cases, Gated):
        cases.target = blob.blob_id
    return blob


async def test_an_old_unreferenced_blob_is_removed_file_and_row(
    content_db, verifier, tmp_path, make_service_token, admin
):
    async with running_content_index(content_db, tmp_path / "blobs", verifier) as harness:
        token = make_service_token("gc-grpc")
        old, referenced, fresh = [await write(harness.stub, token, unique_bytes(1000 * (i + 1))) for i in range(3)]
        for written in (old, referenced):
            await age(admin, written.blob.blob_id)
        await reference(admin, "gc-grpc", referenced.blob.blob_id)
        min_age = Duration()
        min_age.FromTimedelta(GRACE)

        dry = await harness.stub.CollectGarbage(
            pb.CollectGarbageRequest(dry_run=True, min_age=min_age), metadata=auth(token)
        )
        assert old.blob.blob_id in dry.removed_blob_ids
        assert referenced.blob.blob_id not in dry.removed_blob_ids and fresh.blob.blob_id not in dry.removed_blob_ids
        assert len(files_under(harness.root)) == 3 and await row(admin, int(old.blob.blob_id)) is not None

        report = await harness.stub.CollectGarbage(pb.CollectGarbageRequest(min_age=min_age), metadata=auth(token))
        assert list(report.removed_blob_ids) == [old.blob.blob_id]
        assert report.removed_count == 1 and report.freed_bytes == old.blob.size_bytes
        assert await row(admin, int(old.blob.blob_id)) is None
        assert not (harness.root / old.blob.storage_uri).exists()
        assert len(files_under(harness.root)) == 2
        for kept in (referenced, fresh):
            stat = await harness.stub.StatBlob(pb.StatBlobRequest(blob_id=kept.blob.blob_id), metadata=auth(token))
            assert stat.file_present


async def test_the_configured_minimum_age_wins_over_a_smaller_request(content_db, tmp_path, admin):
    cases = build_cases(content_db, tmp_path / "blobs", os.urandom(32))
    cases._policy = type(cases._policy)(cases._policy.max_upload_bytes, timedelta(days=1), timedelta(hours=3))
    blob = (await upload(cases, unique_bytes(1000))).blob
    await age(admin, blob.blob_id, timedelta(hours=2))
    report = await cases.collect_garbage(timedelta(0), 0, dry_run=False)
    assert blob.blob_id not in report.removed_blob_ids and await row(admin, blob.blob_id) is not None


async def test_an_upload_between_row_deletion_and_file_removal_keeps_its_file(gated, admin):
    data = unique_bytes()
    old = await old_orphan(gated, admin, data)
    gated.resume_release.clear()
    collecting = asyncio.create_task(gated.collect_garbage(GRACE, 0, dry_run=False))
    await gated.at_release.wait()  # phase 1 committed: the row is gone, the file not yet
    assert await row(admin, old.blob_id) is None

    again = await upload(gated, data)  # re-creates the row on the very same path
    assert not again.already_existed and again.blob.blob_id != old.blob_id
    assert again.blob.storage_uri == old.storage_uri

    gated.resume_release.set()
    report = await collecting
    assert old.blob_id in report.removed_blob_ids and again.blob.blob_id not in report.removed_blob_ids
    await assert_intact(gated, again.blob, data)
    await reference(admin, SCOPE.tenant, again.blob.blob_id)


async def test_gc_running_between_staging_and_settling_an_upload_loses_nothing(gated, admin):
    data = unique_bytes()
    old = await old_orphan(gated, admin, data)
    hold = asyncio.Event()
    uploading = asyncio.create_task(upload(gated, data, hold))
    await eventually(lambda: any(p.stat().st_size == len(data) for p in files_under(gated._storage.staging)))

    report = await gated.collect_garbage(GRACE, 0, dry_run=False)  # the whole pass, file included
    assert (
        old.blob_id in report.removed_blob_ids
        and not gated._storage.path_for(gated._storage.key_for(old.storage_uri)).exists()
    )

    hold.set()
    settled = await uploading
    assert not settled.already_existed and settled.blob.blob_id != old.blob_id
    await assert_intact(gated, settled.blob, data)


async def test_an_upload_just_before_row_deletion_restarts_the_grace_period(gated, admin):
    data = unique_bytes()
    old = await old_orphan(gated, admin, data)
    gated.resume_forget.clear()
    collecting = asyncio.create_task(gated.collect_garbage(GRACE, 0, dry_run=False))
    await gated.at_forget.wait()  # the candidate is listed, its row not yet locked

    again = await upload(gated, data)
    assert again.already_existed and again.blob.blob_id == old.blob_id

    gated.resume_forget.set()
    report = await collecting
    assert old.blob_id not in report.removed_blob_ids and report.skipped_count >= 1
    await assert_intact(gated, again.blob, data)


async def test_a_reference_being_inserted_makes_gc_wait_and_keep_the_blob(gated, admin, migrated_pg):
    data = unique_bytes()
    old = await old_orphan(gated, admin, data)
    ingest = await asyncpg.connect(migrated_pg.url())
    try:
        transaction = ingest.transaction()
        await transaction.start()
        await reference(ingest, SCOPE.tenant, old.blob_id)  # its foreign-key check locks the blob row
        collecting = asyncio.create_task(gated.collect_garbage(GRACE, 0, dry_run=False))
        await gated.at_forget.wait()
        await asyncio.sleep(0.3)
        assert not collecting.done(), "GC must wait for the referencing transaction"
        await transaction.commit()
        report = await collecting
    finally:
        await ingest.close()
    assert old.blob_id not in report.removed_blob_ids and report.skipped_count >= 1
    await assert_intact(gated, old, data)


async def test_a_reference_after_row_deletion_fails_instead_of_dangling(gated, admin):
    old = await old_orphan(gated, admin, unique_bytes())
    gated.resume_release.clear()
    collecting = asyncio.create_task(gated.collect_garbage(GRACE, 0, dry_run=False))
    await gated.at_release.wait()
    with pytest.raises(asyncpg.ForeignKeyViolationError):
        await reference(admin, SCOPE.tenant, old.blob_id)
    gated.resume_release.set()
    await collecting


async def test_gc_raced_against_uploads_of_the_same_bytes_never_loses_a_referenced_blob(
    content_db, tmp_path, admin, migrated_pg
):
    """Many rounds at full speed: every blob an upload returned gets referenced at once and must
    keep its row and bytes; old blobs nobody rewrote are removed, file and row."""
    cases = build_cases(content_db, tmp_path / "blobs", os.urandom(32))
    rng = random.Random(7)
    contents = [unique_bytes(rng.randint(1, 150_000)) for _ in range(24)]
    rewritten, untouched = contents[:16], contents[16:]
    olds = {data: await old_orphan(cases, admin, data) for data in contents}
    settled: list[tuple[Blob, bytes]] = []
    stop = asyncio.Event()

    async def uploader(data: bytes) -> None:
        for _ in range(3):
            await asyncio.sleep(rng.random() * 0.05)
            blob = (await upload(cases, data)).blob
            async with ingest.acquire() as connection:  # fails if GC removed the row meanwhile
                await reference(connection, SCOPE.tenant, blob.blob_id)
            settled.append((blob, data))

    async def collector() -> list[int]:
        removed = []
        while not stop.is_set():
            report = await cases.collect_garbage(GRACE, 0, dry_run=False)
            removed += report.removed_blob_ids
            await asyncio.sleep(0)
        return removed

    ingest = await asyncpg.create_pool(migrated_pg.url(), min_size=1, max_size=8)
    gc_tasks = [asyncio.create_task(collector()) for _ in range(2)]
    try:
        await asyncio.gather(*(uploader(data) for data in rewritten))
    finally:
        stop.set()
        removed = [blob_id for task in gc_tasks for blob_id in await task]
        await ingest.close()
    final = await cases.collect_garbage(GRACE, 0, dry_run=False)
    removed += final.removed_blob_ids

    for blob, data in settled:
        await assert_intact(cases, blob, data)
    assert not {blob.blob_id for blob, _ in settled} & set(removed)
    for data in untouched:
        old = olds[data]
        assert old.blob_id in removed and await row(admin, old.blob_id) is None
        assert await admin.fetchval("SELECT count(*) FROM content_blobs WHERE content_hash = $1", sha256_hex(data)) == 0
    on_disk = {p.name.split(".")[0] for p in files_under(cases._storage.root)}
    assert on_disk == {sha256_hex(data) for data in rewritten}


async def test_every_table_referencing_blobs_is_counted(admin):
    tables = await admin.fetch(
        "SELECT conrelid::regclass::text AS name FROM pg_constraint "
        "WHERE contype = 'f' AND confrelid = 'content_blobs'::regclass"
    )
    assert {r["name"] for r in tables} == {t.table for t in REFERENCING_TABLES} | set(NON_REFERENCING_TABLES)


async def test_a_grpc_read_of_a_collected_blob_is_not_found(content_db, verifier, tmp_path, make_service_token, admin):
    async with running_content_index(content_db, tmp_path / "blobs", verifier) as harness:
        token = make_service_token("gc-tenant")
        blob = (await write(harness.stub, token, unique_bytes(5000))).blob
        await age(admin, blob.blob_id)
        await harness.cases.collect_garbage(GRACE, 0, dry_run=False)
        with pytest.raises(Exception) as caught:
            await read_all(harness.stub, token, blob.blob_id)
        assert caught.value.code().name == "NOT_FOUND"


async def test_orphan_files_are_swept_by_collect_garbage(content_db, verifier, tmp_path, make_service_token, admin):
    async with running_content_index(content_db, tmp_path / "blobs", verifier) as harness:
        token, isolated_token = make_service_token("gc-orphans"), make_service_token(ISOLATED.tenant)
        await isolate(admin, ISOLATED.tenant)
        named = await write(harness.stub, token, unique_bytes(3000))
        keyed = await write(harness.stub, isolated_token, unique_bytes(3001))
        assert keyed.blob.content_hash.startswith("hmac-sha256:")
        for written in (named, keyed):  # old files whose (recent) rows name them
            backdate(harness.root / written.blob.storage_uri)  # storage_uri: the path under the root
        old = orphan_file(harness.cases, unique_bytes(1234))
        young = orphan_file(harness.cases, unique_bytes(100), by=timedelta(minutes=5))
        strays = [harness.root / "lost+found.txt", old.parent / "quarterly report (final).pdf"]
        for stray in strays:
            stray.write_bytes(b"stray")
            backdate(stray)
        min_age = Duration()
        min_age.FromTimedelta(GRACE)

        dry = await harness.stub.CollectGarbage(
            pb.CollectGarbageRequest(dry_run=True, min_age=min_age), metadata=auth(token)
        )
        assert (dry.orphan_removed_count, dry.orphan_freed_bytes) == (1, 1234) and old.exists()

        report = await harness.stub.CollectGarbage(pb.CollectGarbageRequest(min_age=min_age), metadata=auth(token))
        assert (report.orphan_removed_count, report.orphan_freed_bytes) == (1, 1234)
        assert report.removed_count == 0 and report.freed_bytes == 0
        assert not old.exists() and young.exists() and all(stray.read_bytes() == b"stray" for stray in strays)
        for written, owner in ((named, token), (keyed, isolated_token)):
            stat = await harness.stub.StatBlob(pb.StatBlobRequest(blob_id=written.blob.blob_id), metadata=auth(owner))
            assert stat.file_present


async def test_a_crash_between_row_deletion_and_file_removal_is_swept_by_a_later_pass(content_db, tmp_path, admin):
    cases = build_cases(content_db, tmp_path / "blobs", os.urandom(32))
    data = unique_bytes(5000)
    old = await old_orphan(cases, admin, data)
    path = cases._storage.path_for(cases._storage.key_for(old.storage_uri))

    async def crash(removed):
        raise RuntimeError("the process died before removing the file")

    cases._release = crash
    with pytest.raises(RuntimeError):
        await cases.collect_garbage(GRACE, 0, dry_run=False)
    del cases._release
    assert await row(admin, old.blob_id) is None and path.exists()

    report = await cases.collect_garbage(GRACE, 0, dry_run=False)
    assert report.orphan_removed_count == 0 and path.exists(), "a young orphan may be an upload in progress"
    backdate(path)
    report = await cases.collect_garbage(GRACE, 0, dry_run=False)
    assert (report.orphan_removed_count, report.orphan_freed_bytes) == (1, 5000) and not path.exists()


@pytest.mark.parametrize("isolated", [False, True], ids=["shared", "isolated"])
async def test_the_orphan_sweep_waits_for_an_upload_settling_the_same_file(content_db, tmp_path, admin, isolated):
    """An upload holds its hash's lock from placing its file to committing its row; a sweep that
    listed the file meanwhile (and finds it old: the worst case) must wait, then keep it."""
    cases = build_cases(content_db, tmp_path / "blobs", os.urandom(32))
    scope = ISOLATED if isolated else SCOPE
    if isolated:
        await isolate(admin, scope.tenant)
    data = unique_bytes(7000)
    path = content_path(cases, data, scope, isolated=isolated)
    storage, placed, resume = cases._storage, asyncio.Event(), asyncio.Event()
    place = storage.place

    async def place_then_hold(staged, key, hasher):
        uri = await place(staged, key, hasher)
        backdate(path)
        placed.set()
        await resume.wait()
        return uri

    storage.place = place_then_hold
    uploading = asyncio.create_task(upload(cases, data, scope=scope))
    try:
        await placed.wait()
        sweeping = asyncio.create_task(cases.collect_garbage(GRACE, 0, dry_run=False))
        await eventually_async(lambda: waiting_for_a_lock(admin), "the sweep did not wait for the upload's lock")
        assert not sweeping.done()
    finally:
        resume.set()  # never leave the upload (and its connection) hanging
    settled = (await uploading).blob
    report = await sweeping
    assert report.orphan_removed_count == 0 and path.exists()
    await assert_intact(cases, settled, data, scope)


async def test_orphan_sweeps_raced_against_uploads_of_the_same_bytes_never_lose_an_uploaded_blob(
    content_db, tmp_path, admin, migrated_pg
):
    """Each content starts as an old orphan file; uploads of most of them race sweeps at full
    speed. At age zero every placed file looks old at once, so only the hash locks and the rows
    re-read under them keep an upload's file (the blob pass is left out: at age zero it would
    rightly remove rows before their reference)."""
    cases = build_cases(content_db, tmp_path / "blobs", os.urandom(32))
    await isolate(admin, ISOLATED.tenant)
    rng = random.Random(11)
    contents = [(unique_bytes(rng.randint(1, 120_000)), ISOLATED if i % 2 else SCOPE) for i in range(32)]
    for data, scope in contents:
        orphan_file(cases, data, scope, isolated=scope is ISOLATED)
    uploaded, untouched = contents[:24], contents[24:]
    settled: list[tuple[Blob, bytes, Scope]] = []
    stop = asyncio.Event()

    async def uploader(data: bytes, scope: Scope) -> None:
        for _ in range(2):
            await asyncio.sleep(rng.random() * 0.05)
            blob = (await upload(cases, data, scope=scope)).blob
            async with ingest.acquire() as connection:
                await reference(connection, scope.tenant, blob.blob_id)
            settled.append((blob, data, scope))

    async def sweeper() -> int:
        removed = 0
        while not stop.is_set():
            removed += (await cases._collect_orphans(timedelta(0), 0, dry_run=False))[0]
            await asyncio.sleep(0)
        return removed

    ingest = await asyncpg.create_pool(migrated_pg.url(), min_size=1, max_size=8)
    sweepers = [asyncio.create_task(sweeper()) for _ in range(2)]
    try:
        await asyncio.gather(*(uploader(data, scope) for data, scope in uploaded))
    finally:
        stop.set()
        removed = sum([await task for task in sweepers])
        await ingest.close()
    removed += (await cases._collect_orphans(timedelta(0), 0, dry_run=False))[0]

    assert len(settled) == 2 * len(uploaded)
    for blob, data, scope in settled:
        await assert_intact(cases, blob, data, scope)
    expected = {content_path(cases, data, scope, isolated=scope is ISOLATED) for data, scope in uploaded}
    assert set(files_under(cases._storage.root)) == expected
    assert removed >= len(untouched)
