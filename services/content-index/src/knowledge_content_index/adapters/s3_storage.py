"""Blob bytes on S3-compatible object storage (the BlobStorage port), for ``KNOWLEDGE_BLOB_STORE=s3``.

Layout::

    s3://<bucket>/<prefix>/<hex[:2]>/<hex><ext>    a blob's bytes: written once, never modified
    <KNOWLEDGE_BLOB_ROOT>/.staging/.partial.*      bytes still being received (a local spool)

A blob's key is only known once its last byte has arrived and an object store cannot rename, so
the bytes are received into a local spool file while the use cases hash them (the filesystem
store's staging, with its ``flock``: a killed process's spool is removed at the next start).
Then they are sent to their content key and hashed again on the way: a multipart upload is
completed only when what was sent hashes to the key's digest, and aborted otherwise, or when cut
off any other way, so an object appears whole or not at all and leaves no parts behind; a small
blob is one PUT after the same check. Nothing reaches the store while a client is still
streaming. A process killed in the middle of sending leaves an incomplete multipart upload,
never an object. Its writer keeps a record of it beside its spool file (``.upload.*``) while it
sends; a record whose spool file no writer holds any more names a dead writer's upload, which the
next start (and every garbage collection) aborts. Uploads of a pod that never comes back are
aborted by garbage collection once older than its staging age (a bucket lifecycle rule
``AbortIncompleteMultipartUpload`` is the backstop). Memory stays flat: one part at a time.

Reads are ranged GETs streamed in chunks. Every request is retried with backoff by botocore
(standard mode: connection errors, timeouts, 5xx, throttling); a body cut off mid-stream is
resumed from the next byte with a new ranged GET (tenacity). A store still failing after that is
:class:`BlobStoreUnavailable` (UNAVAILABLE, never an internal error), and the readiness probe
(:meth:`S3BlobStorage.ping`) turns the service NOT_SERVING until it answers again.

A URI is trusted only when it names exactly a content key under this bucket and prefix.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import structlog
from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from botocore.exceptions import BotoCoreError, ClientError, IncompleteReadError, ReadTimeoutError
from botocore.exceptions import ResponseStreamingError as _BodyCutOff
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from knowledge_content_index.adapters.local_storage import PARTIAL_PREFIX, LocalBlobStorage, LocalStagedBlob
from knowledge_content_index.domain.errors import BlobContentMissing, BlobStoreUnavailable
from knowledge_content_index.domain.identity import ContentHasher
from knowledge_content_index.domain.model import BlobKey, ContentListing, StoredFile
from knowledge_content_index.domain.ports import StagedBlob

log = structlog.get_logger("knowledge.content_index")

# One part in memory at a time; S3 allows 10,000 parts of at least 5 MiB (all but the last).
PART_BYTES = 8 * 1024 * 1024
MAX_PARTS = 10_000
HASH_OFFLOAD_BYTES = 64 * 1024
# botocore's attempts per request (its standard mode backs off exponentially with jitter).
REQUEST_ATTEMPTS = 5
# Resumptions of one read whose body was cut off mid-stream (each a new ranged GET).
READ_RESUMES = 5
LISTING_PAGE = 1000
# Beside ``.partial.<name>`` (its spool), ``.upload.<name>`` records the multipart upload sent from it.
UPLOAD_RECORD_PREFIX = ".upload."
# Answers about one object, not the store: a missing object (or a range past its end: truncated).
_NOT_FOUND = frozenset({"404", "NoSuchKey", "NotFound", "NoSuchUpload", "InvalidRange"})
# Errors of a body being read: the stream is resumed from the next byte.
_STREAM_ERRORS = (_BodyCutOff, IncompleteReadError, ReadTimeoutError, aiohttp.ClientError, asyncio.TimeoutError)


class _Truncated(Exception):
    """The body ended before the bytes the range asked for (a connection closed early)."""


@dataclass(frozen=True, slots=True)
class S3Location:
    """Where content keys live: a bucket and a prefix (without slashes at either end, may be empty)."""

    bucket: str
    prefix: str = ""

    @property
    def listing_prefix(self) -> str:
        return f"{self.prefix}/" if self.prefix else ""

    def object_key(self, key: BlobKey) -> str:
        return self.listing_prefix + key.path

    def uri(self, key: BlobKey) -> str:
        return f"s3://{self.bucket}/{self.object_key(key)}"

    def key_of_object(self, object_key: str) -> BlobKey | None:
        if not object_key.startswith(self.listing_prefix):
            return None
        shard, slash, name = object_key[len(self.listing_prefix) :].partition("/")
        return BlobKey.of_path(shard, name) if slash else None

    def key_of(self, storage_uri: str) -> BlobKey | None:
        parts = urlsplit(storage_uri)
        if parts.scheme != "s3" or parts.netloc != self.bucket or parts.query or parts.fragment:
            return None
        return self.key_of_object(parts.path.removeprefix("/"))


def client_config(*, endpoint: str | None, attempts: int = REQUEST_ATTEMPTS, timeout_s: float = 30.0) -> AioConfig:
    # Path-style addressing for a given endpoint (MinIO, Ceph and most S3-compatible stores
    # serve no per-bucket host names); AWS itself picks virtual hosts.
    return AioConfig(
        retries={"mode": "standard", "total_max_attempts": attempts},
        connect_timeout=min(timeout_s, 5.0),
        read_timeout=timeout_s,
        s3={"addressing_style": "path" if endpoint else "auto"},
        max_pool_connections=32,
    )


@asynccontextmanager
async def s3_clients(*, endpoint: str | None, region: str | None) -> AsyncIterator[tuple[Any, Any]]:
    """The client every call uses and a quick one for readiness checks (one attempt, short
    timeouts); credentials come from botocore's usual chain (``AWS_ACCESS_KEY_ID`` and
    ``AWS_SECRET_ACCESS_KEY``, a profile, or the platform's workload identity)."""
    session = get_session()
    async with AsyncExitStack() as stack:
        main = await stack.enter_async_context(
            session.create_client(
                "s3", endpoint_url=endpoint, region_name=region, config=client_config(endpoint=endpoint)
            )
        )
        probe = await stack.enter_async_context(
            session.create_client(
                "s3",
                endpoint_url=endpoint,
                region_name=region,
                config=client_config(endpoint=endpoint, attempts=1, timeout_s=2.0),
            )
        )
        yield main, probe


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _unavailable(operation: str, error: BaseException) -> BlobStoreUnavailable:
    code = _code(error) if isinstance(error, ClientError) else type(error).__name__
    log.warning("blob_store_failed", operation=operation, error=code)
    return BlobStoreUnavailable()


class S3StagedBlob:
    """A spool file being received, and what was uploaded from it."""

    def __init__(self, spool: LocalStagedBlob) -> None:
        self.spool = spool
        self.size = 0
        self.uploaded: BlobKey | None = None  # the key ``prepare`` completed an upload onto
        self.record = spool.path.with_name(UPLOAD_RECORD_PREFIX + spool.path.name.removeprefix(PARTIAL_PREFIX))

    async def write(self, chunk: bytes) -> None:
        await self.spool.write(chunk)
        self.size += len(chunk)

    async def seal(self) -> None:
        await self.spool.seal()

    async def discard(self) -> None:
        self.record.unlink(missing_ok=True)  # before the spool: a record without one names a dead writer
        await self.spool.discard()


class S3Reader:
    """``limit`` bytes from ``offset`` of one object, resumed where a cut-off body stopped."""

    def __init__(self, storage: S3BlobStorage, object_key: str, offset: int, limit: int, chunk_bytes: int) -> None:
        self._storage = storage
        self._object_key = object_key
        self._position = offset
        self._end = offset + limit
        self._chunk_bytes = chunk_bytes
        self._body: Any = None

    async def start(self) -> None:
        """The first GET now: a missing object is known before anything is sent."""
        if self._position < self._end:
            self._body = await self._storage._get_range(self._object_key, self._position, self._end)

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        while self._position < self._end:
            data = await self._next()
            self._position += len(data)
            yield data

    async def _next(self) -> bytes:
        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(READ_RESUMES + 1),
                wait=wait_exponential_jitter(multiplier=0.2, max=5.0, jitter=0.2),
                retry=retry_if_exception_type((*_STREAM_ERRORS, _Truncated)),
                reraise=True,
            ):
                with attempt:
                    return await self._read_some()
        except (*_STREAM_ERRORS, _Truncated) as error:
            raise _unavailable("read", error) from None
        raise AssertionError("unreachable: tenacity either returns or raises")

    async def _read_some(self) -> bytes:
        if self._body is None:
            self._body = await self._storage._get_range(self._object_key, self._position, self._end)
        wanted = min(self._chunk_bytes, self._end - self._position)
        buffer = bytearray()
        try:
            while len(buffer) < wanted:
                data = await self._body.read(wanted - len(buffer))
                if not data:
                    raise _Truncated()
                buffer += data
        except BaseException:
            await self.close()  # the next attempt opens a new range from this position
            raise
        return bytes(buffer)

    async def close(self) -> None:
        body, self._body = self._body, None
        if body is not None:
            with suppress(Exception):
                await body.aclose()


class S3BlobStorage:
    def __init__(self, client: Any, location: S3Location, spool: LocalBlobStorage, probe: Any = None) -> None:
        self._client = client
        self._probe = probe or client
        self.location = location
        self.spool = spool

    # -- naming ----------------------------------------------------------------------------

    def uri_for(self, key: BlobKey) -> str:
        return self.location.uri(key)

    def key_for(self, storage_uri: str) -> BlobKey | None:
        return self.location.key_of(storage_uri)

    # -- calls -----------------------------------------------------------------------------

    async def _call(self, operation: str, **arguments: Any) -> Any:
        """One request (botocore retries it); a store that keeps failing is BlobStoreUnavailable."""
        try:
            return await getattr(self._client, operation)(Bucket=self.location.bucket, **arguments)
        except ClientError as error:
            if _code(error) in _NOT_FOUND:
                raise
            raise _unavailable(operation, error) from None
        except (TimeoutError, BotoCoreError, aiohttp.ClientError) as error:
            raise _unavailable(operation, error) from None

    async def ping(self) -> None:
        """The readiness check: the bucket answers (one quick attempt; raises otherwise)."""
        await self._probe.head_bucket(Bucket=self.location.bucket)

    async def _head(self, object_key: str) -> dict[str, Any] | None:
        try:
            reply: dict[str, Any] = await self._call("head_object", Key=object_key)
        except ClientError:
            return None
        return reply

    async def _get_range(self, object_key: str, start: int, end: int) -> Any:
        try:
            reply = await self._call("get_object", Key=object_key, Range=f"bytes={start}-{end - 1}")
        except ClientError:
            raise BlobContentMissing() from None
        return reply["Body"]

    # -- writing ---------------------------------------------------------------------------

    @asynccontextmanager
    async def stage(self) -> AsyncIterator[S3StagedBlob]:
        async with self.spool.stage() as spool:
            yield S3StagedBlob(spool)

    async def prepare(self, staged: StagedBlob, key: BlobKey, hasher: Callable[[], ContentHasher]) -> None:
        blob = _own(staged)
        await self._upload(blob, key, hasher)
        blob.uploaded = key

    async def place(self, staged: StagedBlob, key: BlobKey, hasher: Callable[[], ContentHasher]) -> str:
        blob = _own(staged)
        if blob.uploaded != key or await self.size_of(self.uri_for(key)) != blob.size:
            await self._upload(blob, key, hasher)  # not prepared, or removed since (by GC, under the lock)
            blob.uploaded = key
        return self.uri_for(key)

    async def _upload(self, blob: S3StagedBlob, key: BlobKey, hasher: Callable[[], ContentHasher]) -> None:
        fd = await asyncio.to_thread(os.open, blob.spool.path, os.O_RDONLY)
        try:
            if blob.size <= PART_BYTES:
                await self._put(fd, blob.size, key, hasher())
            else:
                await self._multipart(fd, blob, key, hasher())
        finally:
            os.close(fd)

    async def _put(self, fd: int, size: int, key: BlobKey, hasher: ContentHasher) -> None:
        data = await asyncio.to_thread(os.pread, fd, size + 1, 0)
        await _update(hasher, data)
        _verify(len(data), size, hasher, key)
        await self._call("put_object", Key=self.location.object_key(key), Body=data)

    async def _multipart(self, fd: int, blob: S3StagedBlob, key: BlobKey, hasher: ContentHasher) -> None:
        object_key, size = self.location.object_key(key), blob.size
        upload_id = (await self._call("create_multipart_upload", Key=object_key))["UploadId"]
        try:
            blob.record.write_text(json.dumps({"key": object_key, "upload_id": upload_id}))
            part_bytes = max(PART_BYTES, -(-size // MAX_PARTS))
            parts: list[dict[str, Any]] = []
            sent = 0
            while data := await asyncio.to_thread(os.pread, fd, part_bytes, sent):
                await _update(hasher, data)
                number = len(parts) + 1
                reply = await self._call(
                    "upload_part", Key=object_key, UploadId=upload_id, PartNumber=number, Body=data
                )
                parts.append({"ETag": reply["ETag"], "PartNumber": number})
                sent += len(data)
                del data  # one part in memory at a time
            _verify(sent, size, hasher, key)
            await self._call(
                "complete_multipart_upload", Key=object_key, UploadId=upload_id, MultipartUpload={"Parts": parts}
            )
        except BaseException:
            # Whatever cut it off (a mismatch, the store, a cancelled call): no parts stay behind.
            if await asyncio.shield(self._abort(object_key, upload_id)):
                blob.record.unlink(missing_ok=True)
            raise
        blob.record.unlink(missing_ok=True)

    async def _abort(self, object_key: str, upload_id: str) -> bool:
        """True once the upload is gone (aborted now, or completed or aborted before)."""
        try:
            await self._call("abort_multipart_upload", Key=object_key, UploadId=upload_id)
        except ClientError:
            return True  # no such upload any more
        except BlobStoreUnavailable:
            log.warning("multipart_upload_not_aborted")  # the next sweep tries again
            return False
        return True

    # -- reading ---------------------------------------------------------------------------

    async def size_of(self, storage_uri: str) -> int | None:
        key = self.key_for(storage_uri)
        if key is None:
            return None
        head = await self._head(self.location.object_key(key))
        return None if head is None else int(head["ContentLength"])

    async def digest(self, storage_uri: str, update: Callable[[bytes], None]) -> int | None:
        size = await self.size_of(storage_uri)
        key = self.key_for(storage_uri)
        if size is None or key is None:
            return None
        reader = S3Reader(self, self.location.object_key(key), 0, size, PART_BYTES)
        try:
            await reader.start()
            async for data in reader.chunks():
                await asyncio.to_thread(update, data)
        except BlobContentMissing:
            return None
        finally:
            await reader.close()
        return size

    async def open(self, storage_uri: str, offset: int, limit: int, chunk_bytes: int) -> S3Reader:
        key = self.key_for(storage_uri)
        if key is None:
            raise BlobContentMissing()
        reader = S3Reader(self, self.location.object_key(key), offset, limit, chunk_bytes)
        await reader.start()
        return reader

    # -- removing --------------------------------------------------------------------------

    async def delete(self, storage_uri: str) -> bool:
        key = self.key_for(storage_uri)
        if key is None or await self.size_of(storage_uri) is None:
            return False
        await self._call("delete_object", Key=self.location.object_key(key))
        return True

    async def sweep_abandoned(self) -> int:
        """The spool files no writer holds (a killed process's) and the multipart uploads their
        writers had started; their number."""
        return await self.spool.sweep_abandoned() + await self._abort_recorded()

    async def _abort_recorded(self) -> int:
        """Abort the uploads recorded beside spool files that are gone: their writers died. A
        record stays when the store cannot be reached (the next sweep tries again)."""
        aborted = 0
        for record in await asyncio.to_thread(lambda: sorted(self.spool.staging.glob(UPLOAD_RECORD_PREFIX + "*"))):
            spool = record.with_name(PARTIAL_PREFIX + record.name.removeprefix(UPLOAD_RECORD_PREFIX))
            if spool.exists():
                continue  # its writer is still sending (or the spool sweep left it to its holder)
            try:
                upload = json.loads(record.read_text())
                object_key, upload_id = str(upload["key"]), str(upload["upload_id"])
            except (OSError, ValueError, KeyError, TypeError):
                record.unlink(missing_ok=True)  # cut off while written: nothing was sent yet
                continue
            if self.location.key_of_object(object_key) is None or await self._abort(object_key, upload_id):
                aborted += 1
                record.unlink(missing_ok=True)
        return aborted

    async def sweep_staging(self, older_than: timedelta) -> int:
        """Old spool files, dead writers' uploads, and multipart uploads on content keys started
        over ``older_than`` ago (of a pod that never came back); their number."""
        removed = await self.spool.sweep_staging(older_than) + await self._abort_recorded()
        cutoff = datetime.now(UTC) - older_than
        arguments: dict[str, str] = {"Prefix": self.location.listing_prefix}
        while True:
            page = await self._call("list_multipart_uploads", **arguments)
            for upload in page.get("Uploads", []):
                if self.location.key_of_object(upload["Key"]) is not None and upload["Initiated"] < cutoff:
                    removed += await self._abort(upload["Key"], upload["UploadId"])
            if not page.get("IsTruncated"):
                return removed
            arguments |= {"KeyMarker": page["NextKeyMarker"], "UploadIdMarker": page["NextUploadIdMarker"]}

    async def remove_if_older(self, storage_uri: str, older_than: timedelta) -> int | None:
        key = self.key_for(storage_uri)
        if key is None:
            return None
        head = await self._head(self.location.object_key(key))
        if head is None or head["LastModified"] >= datetime.now(UTC) - older_than:
            return None
        await self._call("delete_object", Key=self.location.object_key(key))
        return int(head["ContentLength"])

    # -- listing ---------------------------------------------------------------------------

    async def list_content(self, after: BlobKey | None, limit: int) -> ContentListing:
        """Content keys after ``after``: the store lists in key order, which is content-path order."""
        files: list[StoredFile] = []
        strays = 0
        arguments: dict[str, Any] = {"Prefix": self.location.listing_prefix, "MaxKeys": LISTING_PAGE}
        if after is not None:
            arguments["StartAfter"] = self.location.object_key(after)
        while True:
            page = await self._call("list_objects_v2", **arguments)
            for item in page.get("Contents", []):
                key = self.location.key_of_object(item["Key"])
                if key is None:
                    strays += 1
                    continue
                files.append(StoredFile(key, self.uri_for(key), int(item["Size"]), item["LastModified"]))
                if len(files) >= limit:
                    return ContentListing(tuple(files), strays, complete=False)
            if not page.get("IsTruncated"):
                return ContentListing(tuple(files), strays, complete=True)
            arguments["ContinuationToken"] = page["NextContinuationToken"]


def _own(staged: StagedBlob) -> S3StagedBlob:
    if not isinstance(staged, S3StagedBlob):
        raise TypeError("an object store places only what it staged")
    return staged


async def _update(hasher: ContentHasher, data: bytes) -> None:
    if len(data) >= HASH_OFFLOAD_BYTES:
        await asyncio.to_thread(hasher.update, data)
    else:
        hasher.update(data)


class StagedBytesChanged(RuntimeError):
    """The spool no longer holds what was received: nothing is completed (an internal error)."""


def _verify(sent: int, size: int, hasher: ContentHasher, key: BlobKey) -> None:
    if sent != size or hasher.finish().digest != key.digest:
        log.error("staged_bytes_changed", digest=key.digest)
        raise StagedBytesChanged("the staged bytes no longer hash to their key")
