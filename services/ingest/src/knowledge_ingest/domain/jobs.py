"""The job state machine: every change of a job is a pure decision that returns what to write.

A worker's writes (``Transition``) are applied by the job queue only while the worker still holds
the job's lease and the job is unended; the API's (cancel, retry) under the job's row lock. No
rule lives in SQL: the adapters write what these functions answer.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from knowledge_runtime.refusals import REFUSALS, Refusal

from knowledge_ingest.domain.admission import FETCH_STAGE, WAITING_STAGE
from knowledge_ingest.domain.documents import Document, Job, JobResult, State, progress_of
from knowledge_ingest.domain.errors import JobFinished, JobSucceeded, JobSuperseded

DUPLICATE_WAIT_S = 1.0  # how often a job waiting for the same bytes' ingest looks again
CRASHED = "the file could not be processed (internal error); retry the job, or contact the operators if it fails again"


class DocumentEffect(enum.Enum):
    KEEP = "keep"  # the document is left as it is (a duplicate's document is another job's)
    FOLLOW = "follow"  # the document takes the job's state and error
    SEARCHABLE = "searchable"  # chunks replaced; state, chunk count, extractable, warnings from the result


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int
    retry_base_s: float
    max_interruptions: int = 10

    def delay_after(self, attempt: int) -> float:
        return float(self.retry_base_s * 2 ** (attempt - 1))


@dataclass(frozen=True, slots=True)
class Transition:
    """What a job becomes. Unless it ends or goes back to the queue, the lease is kept (renewed)."""

    state: State
    stage: str
    progress: float
    error: str | None = None
    result: JobResult | None = None
    requeue_after_s: float | None = None  # back to QUEUED, due after this many seconds
    refund_attempt: bool = False  # this claim was no try (waiting for another ingest, a dependency restarting)
    interrupted: bool = False  # counts one interruption (a dependency restarted under the job)
    document: DocumentEffect = DocumentEffect.FOLLOW
    unless_cancelled: bool = True  # not written once cancel was asked (the worker then ends it CANCELLED)
    re_extract: bool = False  # a retry of a SEARCHABLE job: its document's chunks are replaced
    refusal: Refusal | None = None  # FAILED because a service refused the job for this reason (kept on the document)

    @property
    def releases_lease(self) -> bool:
        return self.state.terminal or self.requeue_after_s is not None


# ---- the worker's transitions -------------------------------------------------------------


def reached(state: State, done: int = 0, total: int = 0) -> Transition:
    """A step of the pipeline began (or k of n chunks are embedded): honest progress."""
    progress, stage = progress_of(state, done, total)
    return Transition(state, stage, progress)


def fetching() -> Transition:
    """An IngestUrl job's first stage began: its page is being fetched (no document yet)."""
    return Transition(State.QUEUED, "fetching", 0.0, document=DocumentEffect.KEEP)


def abandoned(job: Job, policy: RetryPolicy) -> Transition | None:
    """Interrupted too often (its workers kept dying, or what it needs kept restarting under it):
    end it, or None. The claim that took over a lost lease counted one interruption, no attempt."""
    if job.interruptions <= policy.max_interruptions:
        return None
    return _failed(
        f"ingesting this file stopped unexpectedly {job.interruptions} times; retry the job, or contact "
        "the operators if it fails again"
    )


def interrupted(service: str) -> Transition:
    """A service the job needs went away mid-job (starting or restarting): not the job's failure.
    Back to the queue at once with the attempt given back; workers claim it again once that
    service is ready."""
    return Transition(
        State.QUEUED,
        f"waiting for the {service} (starting or restarting)",
        0.0,
        requeue_after_s=0.0,
        refund_attempt=True,
        interrupted=True,
        unless_cancelled=False,
    )


def settle_duplicate(job: Job, document: Document | None) -> Transition | None:
    """A job for bytes the tenant was already ingesting reports that ingest's real outcome; None
    when that ingest failed or found no text, so this job extracts the document itself."""
    if document is None:
        return Transition(
            State.CANCELLED,
            "cancelled",
            1.0,
            error="the document was deleted",
            document=DocumentEffect.KEEP,
            unless_cancelled=False,
        )
    if not document.state.terminal:
        return Transition(
            State.QUEUED,
            WAITING_STAGE,
            0.0,
            requeue_after_s=DUPLICATE_WAIT_S,
            refund_attempt=True,
            document=DocumentEffect.KEEP,
            unless_cancelled=False,
        )
    if document.state is State.SEARCHABLE and document.chunk_count > 0:
        result = JobResult(document.document_id, document.chunk_count, duplicate=True, warnings=document.warnings)
        return Transition(State.SEARCHABLE, "searchable (duplicate)", 1.0, result=result, document=DocumentEffect.KEEP)
    return None


def stored(
    job: Job,
    chunk_count: int,
    warnings: tuple[str, ...],
    extractor: str = "",
    ocr_page_count: int = 0,
    ocr_confidence: float = 0.0,
) -> Transition:
    """The final write: chunks replaced, document and job SEARCHABLE, the result for one poll;
    what read the text is stored on the document."""
    assert job.document_id is not None
    result = JobResult(
        job.document_id,
        chunk_count,
        re_extracted=job.re_extract,
        extractable=chunk_count > 0,
        warnings=warnings,
        extractor=extractor,
        ocr_page_count=ocr_page_count,
        ocr_confidence=ocr_confidence,
    )
    return Transition(State.SEARCHABLE, "searchable", 1.0, result=result, document=DocumentEffect.SEARCHABLE)


def after_transient(job: Job, reason: str, policy: RetryPolicy) -> Transition:
    """A dependency failed for a while: queued again after a growing delay, FAILED at the last attempt."""
    if job.attempts >= policy.max_attempts:
        return _failed(f"{reason} after {job.attempts} attempts; retry the job later")
    return Transition(
        State.QUEUED,
        f"waiting to retry ({reason}; attempt {job.attempts} of {policy.max_attempts})",
        0.0,
        requeue_after_s=policy.delay_after(job.attempts),
        unless_cancelled=False,
    )


def after_refusal(job: Job, refusal: Refusal, message: str, policy: RetryPolicy) -> Transition:
    """A service refused the job's call for a reason of the closed set. One waiting can fix (the
    model down, an approval pending, something still indexing) is transient: retried after a
    growing delay like any dependency that failed for a while. One waiting cannot fix (a quota or
    budget used up, the feature switched off, a capability missing) ends the job FAILED at once,
    its reason recorded on the document; retrying would only be refused again."""
    if REFUSALS[refusal].waiting_helps:
        retry = after_transient(job, message, policy)
        return retry if retry.state is State.QUEUED else replace(retry, refusal=refusal)
    return _failed(f"{message} ({REFUSALS[refusal].plain})", refusal)


def failed(message: str) -> Transition:
    """A permanent failure: FAILED at once, with words a person can act on."""
    return _failed(message)


def crashed() -> Transition:
    return _failed(CRASHED)


def cancelled() -> Transition:
    """The worker saw the cancel at a checkpoint: CANCELLED, storing nothing."""
    return Transition(State.CANCELLED, "cancelled", 1.0, unless_cancelled=False)


def _failed(message: str, refusal: Refusal | None = None) -> Transition:
    return Transition(State.FAILED, "failed", 1.0, error=message, unless_cancelled=False, refusal=refusal)


# ---- the API's transitions (under the job's row lock) -------------------------------------


class CancelKind(enum.Enum):
    NOW = "now"  # not running: CANCELLED at once, with its document
    ASK = "ask"  # running: marked; its worker stops at its next checkpoint


@dataclass(frozen=True, slots=True)
class CancelDecision:
    kind: CancelKind
    transition: Transition


def cancel_request(job: Job) -> CancelDecision | None:
    """None: the job already ended and is returned unchanged (cancel is idempotent)."""
    if job.state.terminal:
        return None
    if job.state is State.QUEUED:
        return CancelDecision(CancelKind.NOW, Transition(State.CANCELLED, "cancelled", 1.0, unless_cancelled=False))
    return CancelDecision(
        CancelKind.ASK,
        Transition(job.state, "cancelling", job.progress, unless_cancelled=False, document=DocumentEffect.KEEP),
    )


def superseded(job: Job) -> CancelDecision | None:
    """A later version of its document was admitted (passages by reference): cancelled as
    ``cancel_request`` cancels, but its document takes the later version's job, not this end."""
    decision = cancel_request(job)
    if decision is None:
        return None
    return CancelDecision(decision.kind, replace(decision.transition, document=DocumentEffect.KEEP))


def retry_request(job: Job, *, gave_no_text: bool = False, superseded: bool = False) -> Transition | None:
    """A FAILED or CANCELLED job is queued again from the start (None: queued or running, returned
    unchanged); so is a SEARCHABLE one whose file gave no text (``gave_no_text``: its own document
    is SEARCHABLE with no chunks, e.g. a scan read before OCR), extracted again from its kept blob;
    another SEARCHABLE one has nothing to retry; one whose document is gone cannot be, nor one a
    later job of its document ``superseded`` (a later version wins, however it is retried)."""
    again = job.state is State.SEARCHABLE and gave_no_text and not job.duplicate
    if job.state is State.SEARCHABLE and not again:
        raise JobSucceeded()
    if not job.state.terminal:
        return None
    if superseded:
        raise JobSuperseded(job.state.value)
    if job.to_fetch:  # an IngestUrl job that ended before its page was admitted: fetched again
        return Transition(State.QUEUED, FETCH_STAGE, 0.0, requeue_after_s=0.0, unless_cancelled=False)
    if job.document_id is None or job.blob_id is None:
        raise JobFinished(f"{job.state.value} and its document was deleted; upload the file again")
    return Transition(State.QUEUED, "queued", 0.0, requeue_after_s=0.0, unless_cancelled=False, re_extract=again)
