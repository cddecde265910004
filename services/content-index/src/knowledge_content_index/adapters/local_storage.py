"""Blob bytes on the local filesystem under ``KNOWLEDGE_BLOB_ROOT`` (the BlobStorage port).

Layout::

    <root>/<hex[:2]>/<hex><ext>                 a blob's bytes: written once, never modified
    <root>/.staging/.partial.<pid>.<random>     bytes still being received (mode 0600)

Anything else under the root is a stray: listings count it, nothing here reads, follows or
removes it.

The digest is only known once the last byte has arrived, so bytes are received under
``.staging`` (same filesystem, so the final move is one atomic ``os.replace``), fsynced, and only
then placed on their content path, whose directory is fsynced too. Each ``.partial`` is held under
an exclusive ``flock`` by its writer until it is placed or discarded: one that nobody holds is a
dead writer's leftover (a content-index killed mid-upload, on this host or another sharing the
volume), removed at start by :meth:`LocalBlobStorage.sweep_abandoned` and by every garbage
collection; the age-based sweep stays as a backstop. A URI is trusted only when it
names exactly such a content path under this root: nothing outside the root is ever read, written
or removed, whatever a row or a caller says.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import re
import secrets
import stat
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlsplit

from knowledge_content_index.domain.errors import BlobContentMissing
from knowledge_content_index.domain.identity import ContentHasher
from knowledge_content_index.domain.model import BlobKey, ContentListing, StoredFile
from knowledge_content_index.domain.ports import StagedBlob

STAGING_DIR = ".staging"
PARTIAL_PREFIX = ".partial."
# Chunks at least this large are written (and hashed, by the use cases) off the event loop.
OFFLOAD_BYTES = 64 * 1024
DIGEST_BLOCK_BYTES = 1024 * 1024
_SHARD_NAME = re.compile(r"[0-9a-f]{2}")


def _fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class LocalStagedBlob:
    """One ``.partial`` file. Blocking calls run in a worker thread; a cancelled caller never
    closes the descriptor under a thread still using it (the close waits for that thread)."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd  # open (and its flock held) until discarded, sealed or not
        self._sealed = False
        self._inflight: asyncio.Future[Any] | None = None

    async def _run(self, function: Callable[..., Any], *args: Any) -> Any:
        future = asyncio.get_running_loop().run_in_executor(None, function, *args)
        self._inflight = future
        return await asyncio.shield(future)

    def _descriptor(self) -> int:
        if self._fd is None or self._sealed:
            raise RuntimeError("the staged blob is already sealed or discarded")
        return self._fd

    async def write(self, chunk: bytes) -> None:
        fd = self._descriptor()
        if len(chunk) >= OFFLOAD_BYTES:
            await self._run(_write_all, fd, chunk)
        else:
            _write_all(fd, chunk)

    async def seal(self) -> None:
        fd = self._descriptor()
        await self._run(os.fsync, fd)
        self._sealed = True  # the descriptor stays open: its lock marks the file as still wanted

    async def discard(self) -> None:
        with suppress(FileNotFoundError):
            os.unlink(self.path)  # at once: nothing of it stays visible, even while a thread finishes
        if self._inflight is not None and not self._inflight.done():
            self._inflight.add_done_callback(lambda _: self._close())
        else:
            self._close()

    def _close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with suppress(OSError):
                os.close(fd)


class LocalReader:
    def __init__(self, fd: int, offset: int, limit: int, chunk_bytes: int) -> None:
        self._fd = fd
        self._offset = offset
        self._limit = limit
        self._chunk_bytes = chunk_bytes

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        position, end = self._offset, self._offset + self._limit
        while position < end:
            data = await asyncio.to_thread(os.pread, self._fd, min(self._chunk_bytes, end - position), position)
            if not data:
                raise BlobContentMissing()  # truncated under us
            position += len(data)
            yield data

    async def close(self) -> None:
        with suppress(OSError):
            os.close(self._fd)


class LocalBlobStorage:
    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.staging = self.root / STAGING_DIR

    @classmethod
    def create(cls, root: Path) -> LocalBlobStorage:
        """Create the root and its staging directory when missing (raises OSError)."""
        storage = cls(root)
        storage.staging.mkdir(parents=True, exist_ok=True, mode=0o700)
        return storage

    # -- naming ----------------------------------------------------------------------------

    def path_for(self, key: BlobKey) -> Path:
        return self.root / key.path

    def uri_for(self, key: BlobKey) -> str:
        return self.path_for(key).as_uri()

    def key_for(self, storage_uri: str) -> BlobKey | None:
        parts = urlsplit(storage_uri)
        if parts.scheme != "file" or parts.netloc not in ("", "localhost") or parts.query or parts.fragment:
            return None
        path = PurePosixPath(unquote(parts.path))
        if str(path.parent.parent) != str(self.root):
            return None
        return BlobKey.of_path(path.parent.name, path.name)

    def _path_of(self, storage_uri: str) -> Path | None:
        key = self.key_for(storage_uri)
        return None if key is None else self.path_for(key)

    # -- writing ---------------------------------------------------------------------------

    @asynccontextmanager
    async def stage(self) -> AsyncIterator[LocalStagedBlob]:
        while True:
            path = self.staging / f"{PARTIAL_PREFIX}{os.getpid()}.{secrets.token_hex(8)}"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)  # held until discarded: the file is wanted
            if os.fstat(fd).st_nlink > 0:
                break
            os.close(fd)  # a sweep took it in the instant before the lock: take another name
        staged = LocalStagedBlob(path, fd)
        try:
            yield staged
        finally:
            await staged.discard()

    async def prepare(self, staged: StagedBlob, key: BlobKey, hasher: Callable[[], ContentHasher]) -> None:
        """Nothing: placing is one rename, done under the hash's lock."""

    async def place(self, staged: StagedBlob, key: BlobKey, hasher: Callable[[], ContentHasher] | None = None) -> str:
        """The rename; the bytes were hashed as they were staged, and a rename cannot change them."""
        if not isinstance(staged, LocalStagedBlob):
            raise TypeError("a local storage places only what it staged")
        target = self.path_for(key)
        await asyncio.to_thread(self._move, staged.path, target)
        return target.as_uri()

    def _move(self, source: Path, target: Path) -> None:
        shard = target.parent
        if not shard.is_dir():
            shard.mkdir(mode=0o700, exist_ok=True)
            _fsync_directory(self.root)
        os.replace(source, target)
        _fsync_directory(shard)

    # -- reading ---------------------------------------------------------------------------

    async def size_of(self, storage_uri: str) -> int | None:
        path = self._path_of(storage_uri)
        if path is None:
            return None
        try:
            info = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        return info.st_size if stat.S_ISREG(info.st_mode) else None

    async def digest(self, storage_uri: str, update: Callable[[bytes], None]) -> int | None:
        path = self._path_of(storage_uri)
        if path is None:
            return None
        return await asyncio.to_thread(self._feed, path, update)

    @staticmethod
    def _feed(path: Path, update: Callable[[bytes], None]) -> int | None:
        try:
            with open(path, "rb") as handle:
                size = 0
                while block := handle.read(DIGEST_BLOCK_BYTES):
                    update(block)
                    size += len(block)
                return size
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    async def open(self, storage_uri: str, offset: int, limit: int, chunk_bytes: int) -> LocalReader:
        path = self._path_of(storage_uri)
        if path is None:
            raise BlobContentMissing()
        try:
            fd = await asyncio.to_thread(os.open, path, os.O_RDONLY)
        except (FileNotFoundError, NotADirectoryError):
            raise BlobContentMissing() from None
        # An open descriptor keeps the bytes readable even if the file is unlinked meanwhile.
        return LocalReader(fd, offset, limit, chunk_bytes)

    # -- removing --------------------------------------------------------------------------

    async def delete(self, storage_uri: str) -> bool:
        path = self._path_of(storage_uri)
        if path is None:
            return False
        try:
            os.unlink(path)
        except FileNotFoundError:
            return False
        return True

    async def sweep_abandoned(self) -> int:
        """Remove the ``.partial`` files no writer holds (their writer died); their number."""
        return await asyncio.to_thread(self._sweep_abandoned)

    def _sweep_abandoned(self) -> int:
        removed = 0
        with os.scandir(self.staging) as entries:
            for entry in entries:
                if not entry.name.startswith(PARTIAL_PREFIX) or not entry.is_file(follow_symlinks=False):
                    continue
                try:
                    fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW)
                except OSError:
                    continue
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    continue  # its writer holds it
                else:
                    with suppress(FileNotFoundError):
                        os.unlink(entry.path)
                        removed += 1
                finally:
                    os.close(fd)
        return removed

    async def sweep_staging(self, older_than: timedelta) -> int:
        return await asyncio.to_thread(self._sweep, time.time() - older_than.total_seconds())

    def _sweep(self, cutoff: float) -> int:
        removed = 0
        with os.scandir(self.staging) as entries:
            for entry in entries:
                if not entry.name.startswith(PARTIAL_PREFIX):
                    continue
                with suppress(FileNotFoundError):
                    if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                        os.unlink(entry.path)
                        removed += 1
        return removed

    async def remove_if_older(self, storage_uri: str, older_than: timedelta) -> int | None:
        path = self._path_of(storage_uri)
        if path is None:
            return None
        return await asyncio.to_thread(self._remove_if_older, path, time.time() - older_than.total_seconds())

    @staticmethod
    def _remove_if_older(path: Path, cutoff: float) -> int | None:
        try:
            info = os.lstat(path)
            if not stat.S_ISREG(info.st_mode) or info.st_mtime >= cutoff:
                return None
            os.unlink(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        return info.st_size

    # -- listing ---------------------------------------------------------------------------

    async def list_content(self, after: BlobKey | None, limit: int) -> ContentListing:
        start = "" if after is None else f"{after.digest}{after.extension}"
        return await asyncio.to_thread(self._list, start, limit)

    def _list(self, after: str, limit: int) -> ContentListing:
        """Content files named after ``after`` in name order (a name starts with its shard, so
        name order is key order across shards); shards before the cursor's are not read."""
        files: list[StoredFile] = []
        strays = 0
        shards: list[str] = []
        with os.scandir(self.root) as entries:
            for entry in entries:
                if entry.name == STAGING_DIR:
                    continue
                if _SHARD_NAME.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False):
                    shards.append(entry.name)
                else:
                    strays += 1
        for shard in sorted(shards):
            if shard < after[:2]:
                continue
            try:
                names = sorted(os.listdir(self.root / shard))
            except (FileNotFoundError, NotADirectoryError):
                continue
            for name in names:
                if name <= after:
                    continue
                key = BlobKey.of_path(shard, name)
                if key is None:
                    strays += 1
                    continue
                try:
                    info = os.lstat(self.path_for(key))
                except FileNotFoundError:
                    continue  # removed since the directory was read
                if not stat.S_ISREG(info.st_mode):
                    strays += 1  # a link or a directory under a content name
                    continue
                modified = datetime.fromtimestamp(info.st_mtime, UTC)
                files.append(StoredFile(key, self.uri_for(key), info.st_size, modified))
                if len(files) >= limit:
                    return ContentListing(tuple(files), strays, complete=False)
        return ContentListing(tuple(files), strays, complete=True)
