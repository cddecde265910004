"""Domain values that several of ingest's services answer with, as knowledge.v1 messages."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, cast

from google.protobuf import json_format, struct_pb2
from google.protobuf.timestamp_pb2 import Timestamp
from knowledge.v1 import ingest_pb2

from knowledge_ingest.domain.documents import Document, Job, State
from knowledge_ingest.domain.model import Corpus
from knowledge_ingest.domain.tombstones import Tombstone


def timestamp(value: datetime) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(value)
    return stamp


def struct(values: Mapping[str, Any]) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(values)
    return message


def struct_values(message: struct_pb2.Struct) -> dict[str, Any]:
    """A Struct as plain values (numbers as floats: ``domain.metadata`` makes integral ones integers)."""
    values: dict[str, Any] = json_format.MessageToDict(message)
    return values


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
        key=corpus.key or "",
        default_principals=list(corpus.default_principals),
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
        ocr_confidence=document.ocr_confidence,
        job_id=str(document.job_id) if document.job_id else "",
        create_time=timestamp(document.create_time),
        update_time=timestamp(document.update_time),
        warnings=list(document.warnings),
        stage=document.stage,
        progress=document.progress,
        refusal_reason=document.refusal_reason,
        metadata=struct(document.metadata),
        document_ref=document.document_ref,
        principals=list(document.principals),
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


def given_access(
    message: ingest_pb2.UploadDocumentRequest | ingest_pb2.IngestTextRequest | ingest_pb2.IndexPassagesRequest,
) -> list[str] | None:
    """A request's ``access`` (AccessList): its principals, or None when the request has none (then
    the corpus's default applies to a new document, and an existing one keeps its list)."""
    return list(message.access.principals) if message.HasField("access") else None


def upload_accepted(job: Job) -> ingest_pb2.UploadDocumentResponse:
    return ingest_pb2.UploadDocumentResponse(
        job_id=str(job.job_id), filename=job.filename, status="ingesting", corpus_id=str(job.corpus_id)
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
