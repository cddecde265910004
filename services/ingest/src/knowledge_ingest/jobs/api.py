"""IngestJobService over gRPC: intake (uploads, texts, web pages) and the jobs it starts."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
from knowledge.v1 import ingest_pb2, ingest_pb2_grpc
from knowledge_runtime.auth import current_scope
from knowledge_runtime.server import ServiceSpec

from knowledge_ingest.convert import given_access, job_message, struct_values
from knowledge_ingest.domain.documents import Job
from knowledge_ingest.domain.errors import InvalidRequest
from knowledge_ingest.jobs.upload_stream import upload_source
from knowledge_ingest.jobs.uploads import MAX_BATCH_ITEMS, ItemOutcome, TextItem, UploadUseCases
from knowledge_ingest.jobs.usecases import JobUseCases
from knowledge_ingest.jobs.web import WebPageUseCases

CAPABILITIES = {
    "UploadDocument": "document.upload",
    "IngestText": "document.upload",
    "IngestTexts": "document.upload",
    "BatchIngestTexts": "document.upload",
    "IngestUrl": "document.upload",
    "GetIngestJob": "document.upload",
    "CancelIngestJob": "document.upload",
    "RetryIngestJob": "document.upload",
}
Context = grpc.aio.ServicerContext


def text_accepted(job: Job) -> ingest_pb2.IngestTextResponse:
    return ingest_pb2.IngestTextResponse(
        job_id=str(job.job_id), filename=job.filename, status="ingesting", corpus_id=str(job.corpus_id)
    )


def text_item(message: ingest_pb2.IngestTextRequest) -> TextItem:
    """A batch's item; a housekeeping entry goes one at a time (IngestText), never in a batch."""
    for name in ("system_corpus", "about_subject"):
        if getattr(message, name):
            raise InvalidRequest(f"items[].{name} is for IngestText only, not in a batch", field=f"items.{name}")
    return TextItem(
        corpus_id=message.corpus_id,
        text=message.text,
        title=message.title,
        source_url=message.source_url,
        document_id=message.document_id,
        metadata=struct_values(message.metadata),
        principals=given_access(message),
    )


def batch_items(outcomes: list[ItemOutcome]) -> tuple[list[ingest_pb2.IngestTextsItem], int]:
    """Each item's answer in order, and how many were accepted."""
    items = []
    for outcome in outcomes:
        if outcome.job is not None:
            items.append(ingest_pb2.IngestTextsItem(index=outcome.index, job=text_accepted(outcome.job)))
        else:
            assert outcome.error is not None
            items.append(
                ingest_pb2.IngestTextsItem(
                    index=outcome.index,
                    error_reason=outcome.error.reason,
                    error=outcome.error.message,
                    error_code=outcome.error.code,
                )
            )
    return items, sum(1 for outcome in outcomes if outcome.job is not None)


class IngestJobServicer(ingest_pb2_grpc.IngestJobServiceServicer):
    def __init__(self, uploads: UploadUseCases, web: WebPageUseCases, jobs: JobUseCases) -> None:
        self._uploads = uploads
        self._web = web
        self._jobs = jobs

    async def UploadDocument(
        self, request_iterator: AsyncIterator[ingest_pb2.UploadDocumentRequest], context: Context
    ) -> ingest_pb2.UploadDocumentResponse:
        source = await upload_source(request_iterator, max_body_bytes=self._uploads.max_upload_bytes)
        job = await self._uploads.upload(current_scope(), source)
        return ingest_pb2.UploadDocumentResponse(
            job_id=str(job.job_id), filename=job.filename, status="ingesting", corpus_id=str(job.corpus_id)
        )

    async def IngestText(
        self, request: ingest_pb2.IngestTextRequest, context: Context
    ) -> ingest_pb2.IngestTextResponse:
        if request.system_corpus:
            if request.corpus_id or request.document_id or request.source_url or request.HasField("access"):
                raise InvalidRequest(
                    "system_corpus names the target: give no corpus_id, document_id, source_url or access with it",
                    field="system_corpus",
                )
            job = await self._uploads.ingest_housekeeping(
                current_scope(), request.system_corpus, request.text, request.title, request.about_subject
            )
            return text_accepted(job)
        if request.about_subject:
            raise InvalidRequest("about_subject is only for a system_corpus entry", field="about_subject")
        job = await self._uploads.ingest_text(
            current_scope(),
            request.corpus_id,
            request.text,
            request.title,
            request.source_url,
            request.document_id,
            metadata=struct_values(request.metadata),
            principals=given_access(request),
        )
        return text_accepted(job)

    async def IngestTexts(
        self, request_iterator: AsyncIterator[ingest_pb2.IngestTextsRequest], context: Context
    ) -> ingest_pb2.IngestTextsResponse:
        items = []
        async for message in request_iterator:
            items += [text_item(item) for item in message.items]
            if len(items) > MAX_BATCH_ITEMS:  # refused before anything is stored
                raise InvalidRequest(f"at most {MAX_BATCH_ITEMS} items per call; split the batch", field="items")
        answers, accepted = batch_items(await self._uploads.ingest_texts(current_scope(), items))
        return ingest_pb2.IngestTextsResponse(
            items=answers, accepted_count=accepted, rejected_count=len(answers) - accepted
        )

    async def BatchIngestTexts(
        self, request: ingest_pb2.BatchIngestTextsRequest, context: Context
    ) -> ingest_pb2.BatchIngestTextsResponse:
        outcomes = await self._uploads.ingest_texts(current_scope(), [text_item(item) for item in request.items])
        answers, accepted = batch_items(outcomes)
        return ingest_pb2.BatchIngestTextsResponse(
            items=answers, accepted_count=accepted, rejected_count=len(answers) - accepted
        )

    async def IngestUrl(self, request: ingest_pb2.IngestUrlRequest, context: Context) -> ingest_pb2.IngestUrlResponse:
        job = await self._web.ingest_url(current_scope(), request.corpus_id, request.url)
        return ingest_pb2.IngestUrlResponse(
            job_id=str(job.job_id),
            filename=job.filename,
            status="ingesting",
            corpus_id=str(job.corpus_id),
            source_url=job.fetch_url or "",
        )

    async def GetIngestJob(self, request: ingest_pb2.GetIngestJobRequest, context: Context) -> ingest_pb2.IngestJob:
        return job_message(await self._jobs.get(current_scope(), request.job_id))

    async def CancelIngestJob(
        self, request: ingest_pb2.CancelIngestJobRequest, context: Context
    ) -> ingest_pb2.CancelIngestJobResponse:
        return ingest_pb2.CancelIngestJobResponse(
            job=job_message(await self._jobs.cancel(current_scope(), request.job_id))
        )

    async def RetryIngestJob(
        self, request: ingest_pb2.RetryIngestJobRequest, context: Context
    ) -> ingest_pb2.RetryIngestJobResponse:
        return ingest_pb2.RetryIngestJobResponse(
            job=job_message(await self._jobs.retry(current_scope(), request.job_id))
        )


def service_spec(servicer: IngestJobServicer) -> ServiceSpec:
    return ServiceSpec(
        descriptor=ingest_pb2.DESCRIPTOR.services_by_name["IngestJobService"],
        register=lambda server: ingest_pb2_grpc.add_IngestJobServiceServicer_to_server(servicer, server),
        capabilities=CAPABILITIES,
    )
