"""The job state machine's pure decisions: admission and dedup, cancel, retry, transient failures."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from knowledge_ingest.domain.admission import Admission, ExistingDocument, admit, admit_into
from knowledge_ingest.domain.documents import Job, State
from knowledge_ingest.domain.errors import DocumentBusy, DocumentNotInCorpus, JobFinished, JobSucceeded
from knowledge_ingest.domain.jobs import (
    CancelKind,
    DocumentEffect,
    RetryPolicy,
    after_refusal,
    after_transient,
    cancel_request,
    retry_request,
)
from knowledge_runtime.refusals import REFUSALS, Refusal

NOW = datetime.now(UTC)
JOB = Job(
    job_id=uuid.uuid4(),
    tenant="t",
    corpus_id=1,
    document_id=7,
    blob_id=3,
    filename="a.txt",
    mime_type="text/plain",
    state=State.QUEUED,
    stage="queued",
    progress=0.0,
    error=None,
    attempts=1,
    cancel_requested=False,
    re_extract=False,
    create_time=NOW,
    update_time=NOW,
)


def existing(state: State, chunks: int = 0, blob_id: int = 3) -> ExistingDocument:
    return ExistingDocument(
        document_id=7, corpus_id=1, blob_id=blob_id, state=state, chunk_count=chunks, warnings=("w",)
    )


@pytest.mark.parametrize(
    ("document", "admission", "state", "stage"),
    [
        (None, Admission.FRESH, State.QUEUED, "queued"),
        (existing(State.SEARCHABLE, 4), Admission.DUPLICATE, State.SEARCHABLE, "searchable (duplicate)"),
        (existing(State.EMBEDDING), Admission.WAIT_FOR_ORIGINAL, State.QUEUED, "queued (same file being ingested)"),
        (existing(State.QUEUED), Admission.WAIT_FOR_ORIGINAL, State.QUEUED, "queued (same file being ingested)"),
        (existing(State.FAILED), Admission.RE_EXTRACT, State.QUEUED, "queued"),
        (existing(State.CANCELLED), Admission.RE_EXTRACT, State.QUEUED, "queued"),
        (existing(State.SEARCHABLE, 0), Admission.RE_EXTRACT, State.QUEUED, "queued"),
    ],
)
def test_admission_and_dedup(document, admission, state, stage):
    new = admit(document)
    assert (new.admission, new.state, new.stage) == (admission, state, stage)
    assert new.creates_document == (document is None)
    assert new.re_extract == new.requeues_document == (admission is Admission.RE_EXTRACT)
    assert new.duplicate == (admission in (Admission.DUPLICATE, Admission.WAIT_FOR_ORIGINAL))
    if admission is Admission.DUPLICATE:
        assert new.result.duplicate and new.result.chunk_count == 4 and new.result.warnings == ("w",)


def test_text_bound_to_a_document():
    assert admit_into(existing(State.SEARCHABLE, 4), 9, None, None).admission is Admission.RE_EXTRACT
    assert admit_into(existing(State.SEARCHABLE, 4), 3, 1, None).admission is Admission.DUPLICATE
    assert admit_into(existing(State.FAILED), 3, None, None).admission is Admission.RE_EXTRACT
    with pytest.raises(DocumentBusy):
        admit_into(existing(State.EMBEDDING), 9, None, uuid.uuid4())
    with pytest.raises(DocumentNotInCorpus):
        admit_into(existing(State.SEARCHABLE, 4), 9, 2, None)


def test_cancel_ends_a_queued_job_at_once_and_asks_a_running_one():
    now = cancel_request(JOB)
    assert now.kind is CancelKind.NOW and now.transition.state is State.CANCELLED
    assert now.transition.document is DocumentEffect.FOLLOW
    asked = cancel_request(replace(JOB, state=State.EMBEDDING, progress=0.4))
    assert asked.kind is CancelKind.ASK and asked.transition.state is State.EMBEDDING
    assert asked.transition.stage == "cancelling" and asked.transition.document is DocumentEffect.KEEP
    for ended in (State.SEARCHABLE, State.FAILED, State.CANCELLED):
        assert cancel_request(replace(JOB, state=ended)) is None


def test_retry_requeues_an_ended_job_only_when_there_is_something_to_retry():
    again = retry_request(replace(JOB, state=State.FAILED))
    assert again.state is State.QUEUED and again.stage == "queued" and again.progress == 0.0
    assert retry_request(replace(JOB, state=State.EMBEDDING)) is None
    with pytest.raises(JobSucceeded):
        retry_request(replace(JOB, state=State.SEARCHABLE))
    with pytest.raises(JobFinished, match="document was deleted"):
        retry_request(replace(JOB, state=State.CANCELLED, document_id=None))
    assert not again.re_extract


def test_retry_reads_again_a_searchable_file_that_gave_no_text():
    """A scan ingested before OCR existed: SEARCHABLE with no chunks; Retry extracts it again."""
    again = retry_request(replace(JOB, state=State.SEARCHABLE), gave_no_text=True)
    assert again.state is State.QUEUED and again.re_extract
    with pytest.raises(JobSucceeded):  # a duplicate reports another job's document: nothing of its own to redo
        retry_request(replace(JOB, state=State.SEARCHABLE, duplicate=True), gave_no_text=True)


def test_transient_failures_back_off_then_fail():
    policy = RetryPolicy(max_attempts=4, retry_base_s=2.0)
    delays = [after_transient(replace(JOB, attempts=n), "x", policy).requeue_after_s for n in (1, 2, 3)]
    assert delays == [2.0, 4.0, 8.0]
    last = after_transient(replace(JOB, attempts=4), "the embedder is unavailable", policy)
    assert (
        last.state is State.FAILED and last.error == "the embedder is unavailable after 4 attempts; retry the job later"
    )


@pytest.mark.parametrize(
    "refusal",
    [r for r in Refusal if not REFUSALS[r].waiting_helps],
)
def test_a_refusal_waiting_cannot_fix_fails_at_once_with_its_reason(refusal):
    """A quota used up, a feature switched off...: not retried, the reason kept for the document."""
    policy = RetryPolicy(max_attempts=4, retry_base_s=2.0)
    ended = after_refusal(replace(JOB, attempts=1), refusal, "the tenant holds 5 documents of 5", policy)
    assert ended.state is State.FAILED and ended.requeue_after_s is None and ended.refusal is refusal
    assert ended.error == f"the tenant holds 5 documents of 5 ({REFUSALS[refusal].plain})"
    assert ended.document is DocumentEffect.FOLLOW  # the document takes the state, the error and the reason


@pytest.mark.parametrize("refusal", [r for r in Refusal if REFUSALS[r].waiting_helps])
def test_a_refusal_waiting_can_fix_is_transient(refusal):
    policy = RetryPolicy(max_attempts=4, retry_base_s=2.0)
    retried = after_refusal(replace(JOB, attempts=2), refusal, "the embedder is unavailable", policy)
    assert retried == after_transient(replace(JOB, attempts=2), "the embedder is unavailable", policy)
    assert retried.state is State.QUEUED and retried.requeue_after_s == 4.0 and retried.refusal is None
    last = after_refusal(replace(JOB, attempts=4), refusal, "the embedder is unavailable", policy)
    assert last.state is State.FAILED and last.refusal is refusal and "after 4 attempts" in last.error
