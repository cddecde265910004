"""The upload RPC's message stream → one ``UploadSource`` (corpus, name, type, bytes as they come).

Through the gateway a raw body arrives as ``http_body`` chunks with ``?corpus_id=&filename=``
bound to the first message; a browser's multipart/form-data body is parsed as it streams
(fields ``corpus_id``, ``metadata`` (a JSON object), ``principals`` (a JSON array of strings:
who may read the document) and ``file``). The corpus, the metadata and the access list must be
known before the file's first byte (query parameters or form fields placed before the file), so
nothing is written for a corpus the caller cannot use or metadata or a list that is refused. The whole body is capped as it streams, like the gateway caps a
body from its Content-Length: a chunked body has none, and a form's parts other than the file
would otherwise stream without limit.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import cast

from knowledge.v1 import ingest_pb2
from knowledge_runtime.reach import MAX_PRINCIPAL_CHARS, MAX_PRINCIPALS, AccessListInvalid
from python_multipart.exceptions import ParseError
from python_multipart.multipart import MultipartParser, parse_options_header

from knowledge_ingest.convert import given_access, struct_values
from knowledge_ingest.domain.errors import InvalidRequest
from knowledge_ingest.domain.metadata import MAX_TOTAL_BYTES, parse_metadata_json
from knowledge_ingest.jobs.uploads import UploadSource, capped

MAX_FIELD_BYTES = 4096
# The metadata field holds a JSON object of up to 16 KiB once compacted: room for its spacing; the
# principals field a JSON array of up to 100 entries of up to 200 characters.
MAX_FIELD_BYTES_BY_NAME = {"metadata": 4 * MAX_TOTAL_BYTES, "principals": 2 * MAX_PRINCIPALS * MAX_PRINCIPAL_CHARS}
# The corpus must be known before the file's first byte is stored (nothing is written for a corpus
# the caller cannot use), so a gRPC caller names it, and the file, on the stream's first message.
ON_THE_FIRST_MESSAGE = "is required on the stream's first message"


async def upload_source(
    requests: AsyncIterator[ingest_pb2.UploadDocumentRequest], max_body_bytes: int | None = None
) -> UploadSource:
    """``max_body_bytes``: UploadTooLarge as soon as the body crosses it (None: no cap here)."""
    first = await anext(aiter(requests), None)
    if first is None:
        raise InvalidRequest("the upload is empty", field="http_body")
    bodies = _bodies(first, requests, max_body_bytes)
    content_type = first.http_body.content_type or "application/octet-stream"
    media_type, options = parse_options_header(content_type)
    if media_type == b"multipart/form-data":
        boundary = options.get(b"boundary")
        if not boundary:
            raise InvalidRequest("multipart/form-data needs a boundary", field="http_body")
        return await _MultipartUpload(first, bodies, boundary).source()
    if not first.filename:
        raise InvalidRequest(f"filename {ON_THE_FIRST_MESSAGE} (over REST: ?filename=)", field="filename")
    if not first.corpus_id:
        raise InvalidRequest(f"corpus_id {ON_THE_FIRST_MESSAGE} (over REST: ?corpus_id=)", field="corpus_id")
    return UploadSource(
        first.corpus_id,
        first.filename,
        media_type.decode("latin-1"),
        bodies,
        metadata=struct_values(first.metadata),
        principals=given_access(first),
    )


def _bodies(
    first: ingest_pb2.UploadDocumentRequest,
    requests: AsyncIterator[ingest_pb2.UploadDocumentRequest],
    limit: int | None,
) -> AsyncIterator[bytes]:
    """The body's pieces in order, failing as soon as their total crosses ``limit``."""
    pieces = _pieces(first, requests)
    return pieces if limit is None else capped(pieces, limit)


async def _pieces(
    first: ingest_pb2.UploadDocumentRequest, requests: AsyncIterator[ingest_pb2.UploadDocumentRequest]
) -> AsyncIterator[bytes]:
    if first.http_body.data:
        yield first.http_body.data
    async for message in requests:
        for name in ("corpus_id", "filename"):
            if getattr(message, name):  # read from the first message only: never silently ignored
                raise InvalidRequest(f"{name} is read from the stream's first message only", field=name)
        if message.HasField("access"):  # dropped, it would leave open a document meant to be closed
            raise InvalidRequest("access is read from the stream's first message only", field="access")
        if message.http_body.data:
            yield message.http_body.data


class _MultipartUpload:
    """Feeds the body to a streaming multipart parser; yields the file part's bytes."""

    def __init__(self, first, bodies: AsyncIterator[bytes], boundary: bytes) -> None:
        self._first = first
        self._bodies = bodies
        self._fields: dict[str, bytearray] = {}
        self._events: list[tuple[str, object]] = []
        self._name = ""
        self._filename = ""
        self._part_type = ""
        self._header_field = b""
        self._header_value = b""
        self._headers: dict[bytes, bytes] = {}
        self._parser = MultipartParser(
            boundary,
            {
                "on_part_begin": self._part_begin,
                "on_header_field": lambda data, start, end: self._add("field", data[start:end]),
                "on_header_value": lambda data, start, end: self._add("value", data[start:end]),
                "on_header_end": self._header_end,
                "on_headers_finished": lambda: self._events.append(("header", dict(self._headers))),
                "on_part_data": lambda data, start, end: self._events.append(("data", bytes(data[start:end]))),
                "on_part_end": lambda: self._events.append(("end", b"")),
            },
        )
        self._in_file = False
        self._file_started = False
        self._file_done = False

    def _feed(self, body: bytes) -> None:
        """The parser's refusal (a bare CR in a part header, a broken boundary) is the caller's
        malformed body: INVALID_ARGUMENT, never an internal error."""
        try:
            self._parser.write(body)
        except ParseError:
            raise InvalidRequest(
                "the multipart/form-data body is malformed", field="http_body", reason="MULTIPART_MALFORMED"
            ) from None

    def _part_begin(self) -> None:
        self._headers = {}
        self._events.append(("begin", b""))

    def _add(self, which: str, data: bytes) -> None:
        if which == "field":
            self._header_field += data
        else:
            self._header_value += data

    def _header_end(self) -> None:
        self._headers[self._header_field.lower()] = self._header_value
        self._header_field, self._header_value = b"", b""

    def _describe_part(self, headers: dict[bytes, bytes]) -> None:
        """Headers travel with their event: the parser may already be several parts ahead."""
        _disposition, params = parse_options_header(headers.get(b"content-disposition", b""))
        self._name = params.get(b"name", b"").decode("utf-8", "replace")
        self._filename = params.get(b"filename", b"").decode("utf-8", "replace")
        self._part_type = headers.get(b"content-type", b"application/octet-stream").decode("latin-1")

    async def source(self) -> UploadSource:
        pending: list[bytes] = []
        async for body in self._bodies:  # read fields until the file part starts
            self._feed(body)
            pending += self._drain_until_file()
            if self._file_started:
                break
        if not self._file_started:
            raise InvalidRequest("the form has no file part named 'file'", field="file")
        corpus_id = self._first.corpus_id or self._fields.get("corpus_id", bytearray()).decode("utf-8", "replace")
        if not corpus_id:
            raise InvalidRequest(
                "corpus_id must come before the file (form field or query parameter)", field="corpus_id"
            )
        filename = self._filename or self._first.filename
        if not filename:
            raise InvalidRequest("the file part has no filename", field="file")
        metadata = struct_values(self._first.metadata)
        if "metadata" in self._fields:  # a form part before the file: a JSON object
            metadata = parse_metadata_json(self._fields["metadata"].decode("utf-8", "replace"))
        principals = given_access(self._first)
        if "principals" in self._fields:  # a form part before the file: a JSON array of strings
            principals = _principals_json(self._fields["principals"].decode("utf-8", "replace"))
        return UploadSource(
            corpus_id.strip(),
            filename,
            self._part_type,
            self._file_bytes(self._bodies, pending),
            metadata=metadata,
            principals=principals,
        )

    def _drain_until_file(self) -> list[bytes]:
        """Handle parser events; once inside the file part, return the file bytes seen so far."""
        file_bytes: list[bytes] = []
        events, self._events = self._events, []
        for kind, data in events:
            if self._file_done:  # parts after the file are ignored, but for an access list
                if kind == "header":
                    self._describe_part(cast(dict[bytes, bytes], data))
                    if self._name == "principals":  # ignored, it would leave the document open to all
                        raise InvalidRequest("the form part principals must come before the file", field="principals")
                continue
            if self._in_file:
                if kind == "data":
                    file_bytes.append(cast(bytes, data))
                elif kind == "end":
                    self._in_file = False
                    self._file_done = True
                continue
            if kind == "header":
                self._describe_part(cast(dict[bytes, bytes], data))
                if self._name == "file":
                    self._in_file = self._file_started = True
            elif kind == "data" and self._name and self._name != "file":
                field = self._fields.setdefault(self._name, bytearray())
                chunk = cast(bytes, data)
                if len(field) + len(chunk) > MAX_FIELD_BYTES_BY_NAME.get(self._name, MAX_FIELD_BYTES):
                    raise InvalidRequest(f"form field {self._name!r} is too long", field=self._name[:40])
                field.extend(chunk)
        return file_bytes

    async def _file_bytes(self, bodies: AsyncIterator[bytes], pending: list[bytes]) -> AsyncIterator[bytes]:
        for data in pending:
            yield data
        if not self._file_done:
            async for body in bodies:
                self._feed(body)
                for data in self._drain_until_file():
                    yield data
                if self._file_done:
                    break
            else:
                raise InvalidRequest("the multipart body ended inside the file part", field="file")
        # The rest of the body (capped as the whole is) is read for a principals part placed after
        # the file: refused before the upload is accepted, never silently dropped.
        async for body in bodies:
            self._feed(body)
            self._drain_until_file()


def _principals_json(text: str) -> list[str]:
    """The form's ``principals`` part: a JSON array of strings (each checked as the upload is)."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, list) or not all(isinstance(entry, str) for entry in value):
        raise AccessListInvalid(
            "principals", 'the form part principals must be a JSON array of strings, e.g. ["group:hr", "user:ana"]'
        )
    return value
