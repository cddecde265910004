"""The local-filesystem storage adapter: atomic placement, private staging, trusted URIs only."""

import asyncio
import os
from datetime import timedelta
from pathlib import Path

import pytest
from knowledge_content_index.adapters.local_storage import OFFLOAD_BYTES, LocalBlobStorage
from knowledge_content_index.domain.errors import BlobContentMissing
from knowledge_content_index.domain.model import BlobKey

DIGEST = "ab" + "0" * 62


@pytest.fixture
def storage(tmp_path) -> LocalBlobStorage:
    return LocalBlobStorage.create(tmp_path / "blob root with spaces %")


def all_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


async def test_staged_bytes_are_private_then_placed_atomically(storage):
    data = os.urandom(3 * OFFLOAD_BYTES)
    async with storage.stage() as staged:
        await staged.write(data[:10])  # small: inline
        await staged.write(data[10:])  # large: in a worker thread
        assert staged.path.parent == storage.staging and staged.path.name.startswith(".partial.")
        assert oct(staged.path.stat().st_mode & 0o777) == "0o600"
        await staged.seal()
        uri = await storage.place(staged, BlobKey(DIGEST, ".pdf"))
    target = storage.root / "ab" / f"{DIGEST}.pdf"
    assert uri == target.as_uri() and target.read_bytes() == data
    assert all_files(storage.root) == [target]
    assert await storage.size_of(uri) == len(data)


async def test_leaving_the_stage_without_placing_removes_the_bytes(storage):
    with pytest.raises(RuntimeError):
        async with storage.stage() as staged:
            await staged.write(os.urandom(OFFLOAD_BYTES * 2))
            raise RuntimeError("the stream broke")
    assert all_files(storage.root) == []


async def test_a_cancelled_write_never_leaves_the_staged_file(storage):
    started = asyncio.Event()

    async def receive():
        async with storage.stage() as staged:
            started.set()
            while True:
                await staged.write(os.urandom(OFFLOAD_BYTES * 16))

    task = asyncio.create_task(receive())
    await started.wait()
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert all_files(storage.root) == []


def test_uris_round_trip_and_only_content_paths_are_trusted(storage):
    key = BlobKey(DIGEST, ".docx")
    assert storage.key_for(storage.uri_for(key)) == key
    assert storage.key_for(storage.uri_for(BlobKey(DIGEST))) == BlobKey(DIGEST)
    root = storage.root
    untrusted = [
        Path("/etc/passwd").as_uri(),
        (root / "ab" / f"{DIGEST}.sh").as_uri(),  # not a whitelisted extension
        (root / "cd" / f"{DIGEST}.pdf").as_uri(),  # wrong shard
        (root / "ab" / ".." / "ab" / f"{DIGEST}.pdf").as_uri(),
        (root / "ab" / "x" / f"{DIGEST}.pdf").as_uri(),
        (root.parent / "ab" / f"{DIGEST}.pdf").as_uri(),
        (root / ".staging" / f"{DIGEST}.pdf").as_uri(),
        f"s3://bucket/ab/{DIGEST}.pdf",
        f"file://otherhost{root}/ab/{DIGEST}.pdf",
        storage.uri_for(key) + "?x=1",
        str(root / "ab" / f"{DIGEST}.pdf"),
    ]
    for uri in untrusted:
        assert storage.key_for(uri) is None, uri


async def test_nothing_outside_the_root_is_read_or_removed(storage, tmp_path):
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me")
    assert await storage.size_of(outside.as_uri()) is None
    assert not await storage.delete(outside.as_uri())
    with pytest.raises(BlobContentMissing):
        await storage.open(outside.as_uri(), 0, 1, 1)
    assert outside.read_text() == "keep me"


async def test_reads_stream_a_range_and_survive_an_unlink(storage):
    data = os.urandom(10_000)
    async with storage.stage() as staged:
        await staged.write(data)
        await staged.seal()
        uri = await storage.place(staged, BlobKey(DIGEST))
    reader = await storage.open(uri, 100, 5000, 1024)
    await storage.delete(uri)  # an open reader keeps its bytes
    chunks = [c async for c in reader.chunks()]
    await reader.close()
    assert b"".join(chunks) == data[100:5100] and max(map(len, chunks)) == 1024
    assert await storage.size_of(uri) is None and not await storage.delete(uri)


async def test_the_sweep_removes_only_old_staged_leftovers(storage):
    old = storage.staging / ".partial.1.dead"
    old.write_bytes(b"x")
    os.utime(old, (0, 0))
    fresh = storage.staging / ".partial.2.live"
    fresh.write_bytes(b"y")
    other = storage.staging / "unrelated"
    other.write_bytes(b"z")
    os.utime(other, (0, 0))
    assert await storage.sweep_staging(timedelta(hours=1)) == 1
    assert not old.exists() and fresh.exists() and other.exists()


def content_file(storage: LocalBlobStorage, name: str, data: bytes = b"x", *, old: bool = True) -> Path:
    path = storage.root / name[:2] / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    if old:
        os.utime(path, (0, 0))
    return path


async def test_listing_walks_content_files_in_key_order_and_only_counts_the_rest(storage):
    names = sorted(f"{d * 64}{ext}" for d, ext in [("0", ".pdf"), ("a", ""), ("a", ".txt"), ("f", ".docx")])
    for name in names:
        content_file(storage, name, name.encode())
    (storage.root / "0c").mkdir()
    (storage.root / "0c" / ("0c" + "1" * 62)).mkdir()  # a directory under a content name
    content_file(storage, "aa" + "1" * 62 + ".exe")  # not a whitelisted extension
    (storage.root / "aa" / ("aa" + "2" * 62 + ".pdf")).symlink_to(storage.root / "aa" / names[1])
    (storage.root / "bb").mkdir()
    (storage.root / "bb" / f"{'c' * 64}.pdf").write_bytes(b"wrong shard")
    (storage.root / "notes.txt").write_bytes(b"stray at the root")
    (storage.root / "zz").mkdir()  # not a shard name
    (storage.staging / f"{'e' * 64}.pdf").write_bytes(b"staging is never listed")

    listing = await storage.list_content(None, 100)
    assert [f"{f.key.digest}{f.key.extension}" for f in listing.files] == names
    assert listing.complete and listing.stray_count == 6
    first = listing.files[0]
    assert first.storage_uri == storage.uri_for(first.key) and first.size_bytes == len(names[0])
    assert first.modify_time.timestamp() == 0

    head = await storage.list_content(None, 2)
    assert [f.key for f in head.files] == [f.key for f in listing.files[:2]] and not head.complete
    rest = await storage.list_content(head.files[-1].key, 2)
    assert [f.key for f in rest.files] == [f.key for f in listing.files[2:]] and not rest.complete
    end = await storage.list_content(rest.files[-1].key, 2)
    assert end.files == () and end.complete


async def test_remove_if_older_spares_young_files_links_and_anything_not_a_content_path(storage, tmp_path):
    old = content_file(storage, "a" * 64 + ".pdf", b"12345")
    young = content_file(storage, "b" * 64 + ".pdf", old=False)
    link = storage.root / "cc" / ("c" * 64 + ".pdf")
    link.parent.mkdir()
    link.symlink_to(old)
    outside = tmp_path / ("d" * 64 + ".pdf")
    outside.write_bytes(b"keep")
    os.utime(outside, (0, 0))
    hour = timedelta(hours=1)
    for kept in (young, link, outside):
        assert await storage.remove_if_older(kept.as_uri(), hour) is None
    assert young.exists() and link.is_symlink() and outside.exists() and old.exists()
    assert await storage.remove_if_older(old.as_uri(), hour) == 5 and not old.exists()
    assert await storage.remove_if_older(old.as_uri(), hour) is None


# -- uploads cut off by a dead writer ------------------------------------------------------------

DEAD_WRITER = """
import sys, time
from pathlib import Path
import asyncio
from knowledge_content_index.adapters.local_storage import LocalBlobStorage

async def main():
    storage = LocalBlobStorage.create(Path(sys.argv[1]))
    async with storage.stage() as staged:
        await staged.write(b"x" * 100_000)
        print("writing", flush=True)
        time.sleep(600)

asyncio.run(main())
"""


async def test_a_dead_writers_partial_is_swept_and_a_live_ones_is_kept(storage):
    import signal
    import subprocess
    import sys

    writer = subprocess.Popen([sys.executable, "-c", DEAD_WRITER, str(storage.root)], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "writing"
        async with storage.stage() as live:
            await live.write(b"live bytes")
            sealed_path = None
            async with storage.stage() as sealed:
                await sealed.write(b"sealed, not yet placed")
                await sealed.seal()
                sealed_path = sealed.path
                assert len(list(storage.staging.iterdir())) == 3
                assert await storage.sweep_abandoned() == 0  # every writer is alive
                writer.send_signal(signal.SIGKILL)  # content-index killed mid-upload
                writer.wait(10)
                assert await storage.sweep_abandoned() == 1
                assert sorted(storage.staging.iterdir()) == sorted([live.path, sealed_path])
            assert list(storage.staging.iterdir()) == [live.path]
        assert list(storage.staging.iterdir()) == []
    finally:
        if writer.poll() is None:
            writer.kill()
