"""ContentIndexService over gRPC (internal): validate, call one use case, convert."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing

import grpc
from knowledge.v1 import content_index_pb2 as pb
from knowledge.v1 import content_index_pb2_grpc
from knowledge_runtime.auth import current_scope
from knowledge_runtime.server import ServiceSpec

from knowledge_content_index.api import convert
from knowledge_content_index.usecases import BlobUseCases

CAPABILITIES = {
    "WriteBlob": "blob.write",
    "EnsureBlob": "blob.write",
    "ReadBlob": "blob.read",
    "StatBlob": "blob.read",
    "CountReferences": "blob.read",
    "FindByHash": "blob.read",
    "CollectGarbage": "blob.admin",
    "ImportFile": "blob.write",
}


class ContentIndexServicer(content_index_pb2_grpc.ContentIndexServiceServicer):
    def __init__(self, blobs: BlobUseCases) -> None:
        self._blobs = blobs

    async def WriteBlob(
        self, request_iterator: AsyncIterator[pb.WriteBlobRequest], context: grpc.aio.ServicerContext
    ) -> pb.WriteBlobResponse:
        header, chunks = await convert.open_write_stream(request_iterator)
        ensured = await self._blobs.write_blob(current_scope(), header, chunks)
        return pb.WriteBlobResponse(blob=convert.blob_message(ensured.blob), already_existed=ensured.already_existed)

    async def EnsureBlob(
        self, request: pb.EnsureBlobRequest, context: grpc.aio.ServicerContext
    ) -> pb.EnsureBlobResponse:
        ensured = await self._blobs.ensure_blob(
            current_scope(), request.content_hash, request.storage_uri, request.size_bytes, request.mime_type
        )
        return pb.EnsureBlobResponse(
            blob=convert.blob_message(ensured.blob), already_existed=ensured.already_existed, healed=ensured.healed
        )

    async def ReadBlob(
        self, request: pb.ReadBlobRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ReadBlobResponse]:
        read = await self._blobs.read_blob(
            current_scope(), convert.blob_id(request.blob_id), request.offset, request.limit
        )
        try:
            yield pb.ReadBlobResponse(blob=convert.blob_message(read.blob))
            async with aclosing(read.reader.chunks()) as chunks:
                async for chunk in chunks:
                    yield pb.ReadBlobResponse(chunk=chunk)
        finally:
            await read.reader.close()

    async def StatBlob(self, request: pb.StatBlobRequest, context: grpc.aio.ServicerContext) -> pb.StatBlobResponse:
        blob, present = await self._blobs.stat_blob(current_scope(), convert.blob_id(request.blob_id))
        return pb.StatBlobResponse(blob=convert.blob_message(blob), file_present=present)

    async def CountReferences(
        self, request: pb.CountReferencesRequest, context: grpc.aio.ServicerContext
    ) -> pb.CountReferencesResponse:
        counts = await self._blobs.count_references(current_scope(), convert.blob_id(request.blob_id))
        return convert.reference_counts(counts)

    async def FindByHash(
        self, request: pb.FindByHashRequest, context: grpc.aio.ServicerContext
    ) -> pb.FindByHashResponse:
        blob, references = await self._blobs.find_by_hash(current_scope(), request.content_hash)
        if blob is None:
            return pb.FindByHashResponse()
        return pb.FindByHashResponse(
            blob=convert.blob_message(blob), references=[convert.reference_message(r) for r in references]
        )

    async def CollectGarbage(
        self, request: pb.CollectGarbageRequest, context: grpc.aio.ServicerContext
    ) -> pb.CollectGarbageResponse:
        report = await self._blobs.collect_garbage(convert.min_age(request), request.max_blobs, request.dry_run)
        return convert.garbage_report(report)

    async def ImportFile(
        self, request: pb.ImportFileRequest, context: grpc.aio.ServicerContext
    ) -> pb.ImportFileResponse:
        ensured, resolved = await self._blobs.import_file(current_scope(), request.path, request.mime_type)
        return pb.ImportFileResponse(
            blob=convert.blob_message(ensured.blob), already_existed=ensured.already_existed, resolved_path=resolved
        )


def service_spec(servicer: ContentIndexServicer) -> ServiceSpec:
    return ServiceSpec(
        descriptor=pb.DESCRIPTOR.services_by_name["ContentIndexService"],
        register=lambda server: content_index_pb2_grpc.add_ContentIndexServiceServicer_to_server(servicer, server),
        capabilities=CAPABILITIES,
        # Internal: only service tokens reach it (its capabilities are internal ones), and they
        # name no scope; it holds no corpus a scope could reach.
        unscoped=list(CAPABILITIES),
    )
