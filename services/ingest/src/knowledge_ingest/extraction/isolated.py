"""Extraction in a child process: a parser that hangs, exhausts memory or crashes on one file
costs that file, never the ingest process or its worker thread.

The soft bounds of ``ExtractionLimits`` are checked between pages, rows and paragraphs; a
single pathological page or XML part can still spin or allocate past them. Here the child has
a hard wall-clock limit (killed when it is past) and an address-space limit (``RLIMIT_AS``), and
at most ``children`` run at once, so their caps together stay within the service's memory budget
(``domain.extraction.child_allowance``); a file waits for a free place before its child starts.
Children come from a fork server that has imported the parsers once, so a file costs a fork,
not an interpreter start, and no gRPC or event-loop state is ever forked.

Small plain text and markdown (the common case of bulk text ingestion) need no child: their
reading is one linear decode under the same ``ExtractionLimits``, with no parser that could hang
or explode; larger text files still go to a child, under its memory bound.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from knowledge_ingest.domain.extraction import MAX_CHILD_MEMORY, Extracted, ExtractionFailed, ExtractionLimits, Source
from knowledge_ingest.extraction.detect import plain_text
from knowledge_ingest.extraction.extractor import DocumentExtractor, log_result

DEFAULT_MEMORY_BYTES = MAX_CHILD_MEMORY
IN_PROCESS_TEXT_BYTES = 1024 * 1024  # plain text up to this size is read without a child process
_GRACE_S = 60.0  # past the soft time bound, before the child is killed

_context = multiprocessing.get_context("forkserver")
# The fork server imports the parsers once (and the main module, which, as for any
# multiprocessing program, must not do work at import: knowledge-ingest's does not), and loads
# the optional unstructured path's model when it is installed (``preload.py``).
_context.set_forkserver_preload(
    [
        "__main__",
        "knowledge_ingest.extraction.extractor",
        "knowledge_ingest.extraction.preload",
    ]
)


class IsolatedExtractor:
    """The ``Extractor`` port, each file read by ``DocumentExtractor`` in a fresh child.

    ``timeout_s`` defaults to the limits' ``max_seconds`` plus a minute; ``memory_bytes`` (None:
    unlimited) bounds the child's address space; ``children`` (None: unlimited) is how many
    children may run at once (the time limit counts from a child's start, not its wait).
    """

    def __init__(
        self,
        limits: ExtractionLimits | None = None,
        *,
        timeout_s: float | None = None,
        memory_bytes: int | None = DEFAULT_MEMORY_BYTES,
        use_unstructured: bool | None = None,
        children: int | None = None,
    ) -> None:
        self._limits = limits or ExtractionLimits()
        self._places = threading.BoundedSemaphore(children) if children else None
        self._timeout_s = timeout_s if timeout_s is not None else self._limits.max_seconds + _GRACE_S
        self._memory_bytes = memory_bytes
        self._use_unstructured = use_unstructured

    @property
    def timeout_s(self) -> float:
        return self._timeout_s

    async def start(self) -> None:
        """Starts the fork server now, with the service: it imports the parsers (and the optional
        path's model) in the background, so the first file does not wait for that (4-6 s on a
        loaded 2-core machine before a 100-page PDF's child could start). Idempotent."""
        from multiprocessing import forkserver

        forkserver.ensure_running()

    def extract(self, data: Source, filename: str, mime_type: str) -> Extracted:
        if _small_plain_text(data, filename, mime_type):
            return DocumentExtractor(self._limits, use_unstructured=False).extract(data, filename, mime_type)
        if self._places is None:
            return self._in_child(data, filename, mime_type)
        with self._places:
            return self._in_child(data, filename, mime_type)

    def _in_child(self, data: Source, filename: str, mime_type: str) -> Extracted:
        started = time.monotonic()
        payload = bytes(data) if isinstance(data, (bytes, bytearray, memoryview)) else os.fspath(data)
        receiver, sender = _context.Pipe(duplex=False)
        child = _context.Process(
            target=_child,
            args=(sender, payload, filename, mime_type, self._limits, self._memory_bytes, self._use_unstructured),
            daemon=True,
        )
        child.start()
        sender.close()  # the child holds the only writer: its death reads as end of file here
        try:
            outcome = _receive(receiver, self._timeout_s)
        finally:
            receiver.close()
            if child.is_alive():
                child.kill()
            child.join(5)
        result = self._result(outcome, child.exitcode)
        log_result(result, time.monotonic() - started)
        return result

    def _result(self, outcome: tuple[Any, ...] | None, exitcode: int | None) -> Extracted:
        if outcome is None:
            raise ExtractionFailed(
                f"reading the file took longer than {self._timeout_s:g} seconds; split it into smaller files",
                reason=ExtractionFailed.EXTRACTION_TIMEOUT,
            )
        kind = outcome[0]
        if kind == "ok":
            return outcome[1]
        if kind == "failed":
            _, message, reason, file_format = outcome
            raise ExtractionFailed(message, reason=reason, file_format=file_format)
        if kind == "memory":
            raise ExtractionFailed(
                "reading the file needs more memory than allowed; split it into smaller files",
                reason=ExtractionFailed.FILE_TOO_COMPLEX,
            )
        if kind == "died":
            raise ExtractionFailed(
                f"the file could not be read: its reader stopped (exit status {exitcode})",
                reason=ExtractionFailed.FILE_CORRUPT,
            )
        raise RuntimeError(f"extraction failed in the child process: {outcome[1]}")


def _small_plain_text(data: Source, filename: str, mime_type: str) -> bool:
    if isinstance(data, (bytes, bytearray, memoryview)):
        size, head = len(data), bytes(data[:1024])
    else:
        size = os.path.getsize(data)
        with open(os.fspath(data), "rb") as handle:
            head = handle.read(1024)
    return size <= IN_PROCESS_TEXT_BYTES and plain_text(head, filename, mime_type)


def _receive(receiver: Connection, timeout_s: float) -> tuple[Any, ...] | None:
    """The child's answer; ("died",) when it ended without one; None past the time limit."""
    if not receiver.poll(timeout_s):
        return None
    try:
        return receiver.recv()
    except (EOFError, OSError):
        return ("died",)


def _child(
    sender: Connection,
    data: Source,
    filename: str,
    mime_type: str,
    limits: ExtractionLimits,
    memory_bytes: int | None,
    use_unstructured: bool | None,
) -> None:
    try:
        if memory_bytes:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        extractor = DocumentExtractor(limits, use_unstructured=use_unstructured)
        outcome: tuple[Any, ...] = ("ok", extractor.extract_quietly(data, filename, mime_type))
    except ExtractionFailed as error:
        outcome = ("failed", error.message, error.reason, error.file_format)
    except MemoryError:
        outcome = ("memory",)
    except BaseException as error:  # noqa: BLE001 - reported by type only: a message may quote the file
        outcome = ("error", type(error).__name__)
    try:
        sender.send(outcome)
    except MemoryError:
        sender.send(("memory",))
    finally:
        sender.close()
