"""The small blobs this process wrote moments ago, kept in memory for the job that reads them.

A text sent through ``POST /texts:batch`` is written to content-index and, milliseconds later,
read back by a worker of the same process (its job was queued by the same write). Keeping the
bytes saves that read: a ReadBlob call, a staging file and its directory per text. Blobs are
content-addressed, so a blob id's bytes never change; an entry is keyed by tenant and blob id
(only the tenant that wrote it gets it), handed out once, and dropped after ``ttl_s`` or when the
bound on all kept bytes needs room. Anything not kept (a large file, another replica's upload, a
retry) is read from content-index as before.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable

MAX_BLOB_BYTES = 1024 * 1024  # a blob is kept when it is at most this large
MAX_TOTAL_BYTES = 32 * 1024 * 1024
TTL_S = 120.0


class KeptBlobs:
    def __init__(
        self,
        *,
        max_blob_bytes: int = MAX_BLOB_BYTES,
        max_total_bytes: int = MAX_TOTAL_BYTES,
        ttl_s: float = TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._max_blob_bytes = max_blob_bytes
        self._max_total_bytes = max_total_bytes
        self._ttl_s = ttl_s
        self._clock = clock
        self._entries: OrderedDict[tuple[str, int], tuple[float, bytes]] = OrderedDict()  # oldest first
        self._total = 0

    def recorder(self, chunks: AsyncIterator[bytes]) -> tuple[AsyncIterator[bytes], Callable[[], bytes | None]]:
        """``chunks`` passed through unchanged, and a function that gives the bytes they carried
        once they are consumed, or None when there were more than ``max_blob_bytes``."""
        parts: list[bytes] | None = []
        size = 0

        async def passing() -> AsyncIterator[bytes]:
            nonlocal parts, size
            async for chunk in chunks:
                if parts is not None:
                    size += len(chunk)
                    if size > self._max_blob_bytes:
                        parts = None  # too large to keep: stop copying
                    else:
                        parts.append(bytes(chunk))
                yield chunk

        return passing(), lambda: None if parts is None else b"".join(parts)

    def keep(self, tenant: str, blob_id: int, data: bytes) -> None:
        if len(data) > self._max_blob_bytes:
            return
        self._expire()
        key = (tenant, blob_id)
        if key in self._entries:
            self._total -= len(self._entries.pop(key)[1])
        while self._entries and self._total + len(data) > self._max_total_bytes:
            self._total -= len(self._entries.popitem(last=False)[1][1])
        self._entries[key] = (self._clock() + self._ttl_s, data)
        self._total += len(data)

    def take(self, tenant: str, blob_id: int) -> bytes | None:
        """The kept bytes of ``tenant``'s blob, removed from here; None when not kept (or expired)."""
        self._expire()
        entry = self._entries.pop((tenant, blob_id), None)
        if entry is None:
            return None
        self._total -= len(entry[1])
        return entry[1]

    def _expire(self) -> None:
        now = self._clock()
        while self._entries:
            key, (expires, data) = next(iter(self._entries.items()))
            if expires > now:
                return
            del self._entries[key]
            self._total -= len(data)
