"""PassageService over gRPC: validate, call one use case, convert."""

from __future__ import annotations

from typing import cast

import grpc
from knowledge.v1 import common_pb2, ingest_pb2, ingest_pb2_grpc
from knowledge_runtime.auth import current_scope
from knowledge_runtime.server import ServiceSpec

from knowledge_ingest.convert import given_access, state_value, struct_values, tombstone_message
from knowledge_ingest.passages.usecases import Checked, PassageUseCases

CAPABILITIES = {
    "IndexPassages": "document.upload",
    "RemoveByReference": "document.upload",
    "CheckIndexing": "corpus.read",
}
Context = grpc.aio.ServicerContext


def check_message(checked: Checked) -> ingest_pb2.CheckIndexingResponse:
    message = ingest_pb2.CheckIndexingResponse(admitted=checked.refusal is None, corpus_id=str(checked.corpus_id))
    if checked.refusal is not None:
        message.reason = cast(
            common_pb2.RefusalReason, common_pb2.RefusalReason.Value(f"REFUSAL_REASON_{checked.refusal.reason}")
        )
        message.message = checked.refusal.message
        message.metadata.update(checked.refusal.metadata)
    return message


class PassageServicer(ingest_pb2_grpc.PassageServiceServicer):
    def __init__(self, passages: PassageUseCases) -> None:
        self._passages = passages

    async def IndexPassages(
        self, request: ingest_pb2.IndexPassagesRequest, context: Context
    ) -> ingest_pb2.IndexPassagesResponse:
        indexed = await self._passages.index(
            current_scope(),
            request.corpus_id,
            request.corpus_key,
            request.document_ref,
            request.content_sha256,
            request.title,
            struct_values(request.metadata),
            [(p.fragment, p.text, struct_values(p.metadata)) for p in request.passages],
            request.confidentiality,
            given_access(request),
        )
        return ingest_pb2.IndexPassagesResponse(
            job_id=str(indexed.job.job_id) if indexed.job is not None else "",
            state=state_value(indexed.state),
            document_id=str(indexed.document_id),
            unchanged=indexed.unchanged,
            corpus_id=str(indexed.corpus_id),
            corpus_created=indexed.corpus_created,
        )

    async def RemoveByReference(
        self, request: ingest_pb2.RemoveByReferenceRequest, context: Context
    ) -> ingest_pb2.RemoveByReferenceResponse:
        removed = await self._passages.remove(
            current_scope(), request.corpus_id, request.corpus_key, request.document_ref
        )
        message = ingest_pb2.RemoveByReferenceResponse(
            removed=removed.removed, cancelled_job_id=removed.cancelled_job_id or ""
        )
        if removed.tombstone is not None:
            message.tombstone.CopyFrom(tombstone_message(removed.tombstone))
        return message

    async def CheckIndexing(
        self, request: ingest_pb2.CheckIndexingRequest, context: Context
    ) -> ingest_pb2.CheckIndexingResponse:
        checked = await self._passages.check(
            current_scope(),
            request.corpus_id,
            request.corpus_key,
            request.bytes,
            request.passages,
            request.document_ref,
        )
        return check_message(checked)


def service_spec(servicer: PassageServicer) -> ServiceSpec:
    return ServiceSpec(
        descriptor=ingest_pb2.DESCRIPTOR.services_by_name["PassageService"],
        register=lambda server: ingest_pb2_grpc.add_PassageServiceServicer_to_server(servicer, server),
        capabilities=CAPABILITIES,
    )
