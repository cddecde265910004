"""Domain values to and from knowledge.v1 messages."""

from __future__ import annotations

from typing import cast

from google.protobuf.timestamp_pb2 import Timestamp
from knowledge.v1 import ingest_pb2

from knowledge_ingest.domain.documents import Document, Job, State
from knowledge_ingest.domain.errors import InvalidRequest
from knowledge_ingest.domain.model import Corpus
from knowledge_ingest.domain.text import TextPage
from knowledge_ingest.service_layer.uploads import ItemOutcome, TextItem


def timestamp(value) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(value)
    return stamp


def state_value(state: State) -> ingest_pb2.DocumentState:
    return cast(ingest_pb2.DocumentState, ingest_pb2.DocumentState.Value(f"DOCUMENT_STATE_{state.value}"))


def corpus_message(corpus: Corpus) -> ingest_pb2.Corpus:
    return ingest_pb2.Corpus(
        corpus_id=str(corpus.corpus_id),
        name=corpus.name,
        description=corpus.description,
        document_count=corpus.document_count,
        chunk_count=corpus.chunk_count,
        create_time=timestamp(corpus.create_time),
    )


def document_message(document: Document) -> ingest_pb2.Document:
    return ingest_pb2.Document(
        document_id=str(document.document_id),
        corpus_id=str(document.corpus_id),
        filename=document.filename,
        state=state_value(document.state),
        error=document.error or "",
        chunk_count=document.chunk_count,
        size_bytes=document.size_bytes,
        mime_type=document.mime_type,
        extractable=bool(document.extractable),
        source_url=document.source_url or "",
        job_id=str(document.job_id) if document.job_id else "",
        create_time=timestamp(document.create_time),
        update_time=timestamp(document.update_time),
        warnings=list(document.warnings),
    )


def job_message(job: Job) -> ingest_pb2.IngestJob:
    message = ingest_pb2.IngestJob(
        job_id=str(job.job_id),
        state=state_value(job.state),
        progress=round(job.progress, 4),
        stage=job.stage,
        error=job.error or "",
        corpus_id=str(job.corpus_id),
        filename=job.filename,
        attempt=job.attempts,
        interruptions=job.interruptions,
        create_time=timestamp(job.create_time),
        update_time=timestamp(job.update_time),
    )
    if job.result is not None:
        message.result.CopyFrom(
            ingest_pb2.IngestResult(
                document_id=str(job.result.document_id),
                chunk_count=job.result.chunk_count,
                message=job.result.message,
                duplicate=job.result.duplicate,
                re_extracted=job.result.re_extracted,
                extractable=job.result.extractable,
                warnings=list(job.result.warnings),
            )
        )
    return message


def text_message(page: TextPage) -> ingest_pb2.GetDocumentTextResponse:
    message = ingest_pb2.GetDocumentTextResponse(
        document_id=str(page.document_id), text=page.text, source_url=page.source_url
    )
    if page.page is not None:
        message.page = page.page
        message.page_count = page.page_count or 0
    if page.next_page is not None:
        message.next_page = page.next_page
    if page.previous_page is not None:
        message.previous_page = page.previous_page
    return message


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
