"""Domain values to and from knowledge.v1 messages; the WriteBlob stream's framing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

from google.protobuf.timestamp_pb2 import Timestamp
from knowledge.v1 import content_index_pb2
from knowledge_runtime import ids

from knowledge_content_index.domain.errors import BlobNotFound, InvalidBlobRequest, InvalidWriteStream
from knowledge_content_index.domain.model import Blob, BlobReference, GarbageReport, ReferenceCounts, UploadHeader


def timestamp(value) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(value)
    return stamp


def blob_id(text: str) -> int:
    """A blob id as the database knows it; a malformed one names no blob."""
    if not text:
        raise InvalidBlobRequest("blob_id is required", field="blob_id")
    parsed = ids.parse_id(text)
    if parsed is None:
        raise BlobNotFound()
    return parsed


def blob_message(blob: Blob) -> content_index_pb2.Blob:
    return content_index_pb2.Blob(
        blob_id=str(blob.blob_id),
        content_hash=str(blob.content_hash),
        size_bytes=blob.size_bytes,
        storage_uri=location(blob.storage_uri),
        mime_type=blob.mime_type,
        create_time=timestamp(blob.create_time),
    )


def location(storage_uri: str) -> str:
    """Where a blob lives as callers see it: ``<hex[:2]>/<hex><ext>`` under the blob root. The
    server's absolute path never leaves the service."""
    return "/".join(PurePosixPath(unquote(urlsplit(storage_uri).path)).parts[-2:])


def reference_counts(counts: ReferenceCounts) -> content_index_pb2.CountReferencesResponse:
    return content_index_pb2.CountReferencesResponse(
        total=counts.total,
        by_entity_type=[
            content_index_pb2.ReferenceCount(entity_type=entity_type, count=count)
            for entity_type, count in counts.by_entity_type
        ],
    )


def reference_message(reference: BlobReference) -> content_index_pb2.BlobReference:
    return content_index_pb2.BlobReference(
        entity_type=reference.entity_type,
        entity_id=reference.entity_id,
        corpus_id="" if reference.corpus_id is None else str(reference.corpus_id),
        create_time=timestamp(reference.create_time),
    )


def garbage_report(report: GarbageReport) -> content_index_pb2.CollectGarbageResponse:
    return content_index_pb2.CollectGarbageResponse(
        removed_count=report.removed_count,
        freed_bytes=report.freed_bytes,
        removed_blob_ids=[str(i) for i in report.removed_blob_ids],
        skipped_count=report.skipped_count,
        orphan_removed_count=report.orphan_removed_count,
        orphan_freed_bytes=report.orphan_freed_bytes,
    )


def min_age(request: content_index_pb2.CollectGarbageRequest) -> timedelta | None:
    return request.min_age.ToTimedelta() if request.HasField("min_age") else None


async def open_write_stream(
    messages: AsyncIterator[content_index_pb2.WriteBlobRequest],
) -> tuple[UploadHeader, AsyncIterator[bytes]]:
    """The stream's header and an iterator of its chunks; anything else is INVALID_ARGUMENT."""
    stream = aiter(messages)
    try:
        first = await anext(stream)
    except StopAsyncIteration:
        raise InvalidWriteStream("the stream is empty; send a header first") from None
    if first.WhichOneof("payload") != "header":
        raise InvalidWriteStream("the first message must be the header")
    header = first.header
    return UploadHeader.parse(header.filename, header.mime_type, header.expected_size_bytes), _chunks(stream)


async def _chunks(stream: AsyncIterator[content_index_pb2.WriteBlobRequest]) -> AsyncIterator[bytes]:
    async for message in stream:
        kind = message.WhichOneof("payload")
        if kind == "chunk":
            yield message.chunk
        elif kind == "header":
            raise InvalidWriteStream("only the first message may be a header")
        else:
            raise InvalidWriteStream("a message carries neither a header nor a chunk")
