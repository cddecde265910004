"""Domain values to and from knowledge.v1 messages."""

from __future__ import annotations

from typing import cast

from google.protobuf.timestamp_pb2 import Timestamp
from knowledge.v1 import ingest_pb2

from knowledge_ingest.domain.documents import Document, Job, State
from knowledge_ingest.domain.errors import InvalidRequest
from knowledge_ingest.domain.events import Event
from knowledge_ingest.domain.imports import Binding, Finding, PassReport
from knowledge_ingest.domain.model import Corpus
from knowledge_ingest.domain.text import TextPage
from knowledge_ingest.domain.tombstones import Tombstone
from knowledge_ingest.domain.watch import DocumentChange
from knowledge_ingest.jobs.uploads import ItemOutcome, TextItem


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
        scope=str(corpus.scope),
        confidentiality=corpus.confidentiality.value,
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
        extractor=document.extractor,
        ocr_page_count=document.ocr_page_count,
        job_id=str(document.job_id) if document.job_id else "",
        create_time=timestamp(document.create_time),
        update_time=timestamp(document.update_time),
        warnings=list(document.warnings),
        stage=document.stage,
        progress=document.progress,
        refusal_reason=document.refusal_reason,
    )


def change_message(change: DocumentChange) -> ingest_pb2.DocumentChange:
    return ingest_pb2.DocumentChange(
        kind=f"DOCUMENT_CHANGE_KIND_{change.kind.value}",
        document_id=str(change.document_id) if change.document_id is not None else "",
        document=document_message(change.document) if change.document is not None else None,
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
        document_id=str(page.document_id), text=page.text, source_url=page.source_url, extractor=page.extractor
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


# ---- fenced imports, change findings, auto-index ----


def upload_accepted(job: Job) -> ingest_pb2.UploadDocumentResponse:
    return ingest_pb2.UploadDocumentResponse(
        job_id=str(job.job_id), filename=job.filename, status="ingesting", corpus_id=str(job.corpus_id)
    )


def binding_message(binding: Binding) -> ingest_pb2.ImportBinding:
    message = ingest_pb2.ImportBinding(
        corpus_id=str(binding.corpus_id),
        root=binding.root_name,
        mode=binding.mode.value,
        set_by=binding.set_by,
        update_time=timestamp(binding.update_time),
    )
    if binding.last_scan_time is not None:
        message.last_scan_time.CopyFrom(timestamp(binding.last_scan_time))
    return message


def finding_message(finding: Finding) -> ingest_pb2.ImportFinding:
    message = ingest_pb2.ImportFinding(
        finding_id=str(finding.finding_id),
        corpus_id=str(finding.corpus_id),
        root=finding.root_name,
        path=finding.path,
        content_hash=finding.content_hash,
        size_bytes=finding.size_bytes,
        kind=finding.kind,
        state=finding.state.value,
        job_id=str(finding.job_id) if finding.job_id else "",
        decided_by=finding.decided_by or "",
        create_time=timestamp(finding.create_time),
    )
    if finding.decided_time is not None:
        message.decide_time.CopyFrom(timestamp(finding.decided_time))
    return message


def pass_message(report: PassReport) -> ingest_pb2.ScanImportsResponse:
    return ingest_pb2.ScanImportsResponse(
        roots=report.roots,
        files_seen=report.files_seen,
        findings_recorded=report.findings_recorded,
        jobs_started=report.jobs_started,
        errors=report.errors,
    )


# ---- events ----


def event_message(event: Event) -> ingest_pb2.Event:
    detail = event.detail
    from_corpus = detail.get("from_corpus_id")
    return ingest_pb2.Event(
        event_id=str(event.event_id) if event.event_id else "",
        cursor=event.cursor,
        type=event.type.value,
        document_id=str(event.document_id) if event.document_id is not None else "",
        corpus_id=str(event.corpus_id) if event.corpus_id is not None else "",
        time=timestamp(event.time),
        chunk_count=int(detail.get("chunk_count", 0)),
        warnings=[str(w) for w in detail.get("warnings", ())],
        reason=str(detail.get("reason", "")),
        from_corpus_id=str(from_corpus) if from_corpus is not None else "",
    )


def tombstone_message(tombstone: Tombstone) -> ingest_pb2.Tombstone:
    message = ingest_pb2.Tombstone(
        tombstone_id=str(tombstone.tombstone_id),
        document_id=str(tombstone.document_id),
        corpus_id=str(tombstone.corpus_id),
        filename=tombstone.filename,
        content_hash=tombstone.content_hash,
        chunk_count=tombstone.chunk_count,
        deleted_by=tombstone.deleted_by,
        reason=tombstone.reason,
        delete_time=timestamp(tombstone.delete_time),
        removal_state=tombstone.removal_state.value.lower(),
    )
    if tombstone.remove_time is not None:
        message.remove_time.CopyFrom(timestamp(tombstone.remove_time))
    return message
