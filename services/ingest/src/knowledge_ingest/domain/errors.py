"""Ingest's domain errors; each declares its status code through its runtime base class."""

from __future__ import annotations

from knowledge_runtime.errors import (
    AlreadyExists,
    CorpusKeyNotFound,
    CorpusNotFound,
    DocumentNotFound,
    FailedPrecondition,
    InvalidArgument,
    InvalidField,
    NotFound,
    OutOfRange,
    PermissionDenied,
    Unavailable,
)
from knowledge_runtime.reach import ScopePath
from knowledge_runtime.refusals import Refusal, Refused

__all__ = [
    "CorpusKeyNotFound",
    "CorpusNameTaken",
    "CorpusNotEmpty",
    "CorpusNotFound",
    "CorpusReadOnly",
    "CursorExpired",
    "DependencyNotReady",
    "DocumentBusy",
    "DocumentIndexing",
    "DocumentNotFound",
    "DocumentNotInCorpus",
    "DocumentRefNotFound",
    "FetchFailed",
    "InvalidCorpus",
    "InvalidRequest",
    "JobFinished",
    "JobNotFound",
    "JobSucceeded",
    "ModelChangeNotFound",
    "ModelChangeOpen",
    "ModelChangeState",
    "ModelNotLoaded",
    "PageOutOfRange",
    "UrlRefused",
    "WebhookNotFound",
]

# An upload over the cap is the runtime's UploadTooLarge, the same error content-index raises; a
# corpus or document not found is the runtime's CorpusNotFound or DocumentNotFound, as in search.


class InvalidCorpus(InvalidField):
    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(field, message)


class CorpusNameTaken(AlreadyExists):
    reason = "CORPUS_ALREADY_EXISTS"

    def __init__(self, name: str) -> None:
        super().__init__("a corpus with this name already exists", metadata={"name": name[:200]})


class CorpusKeyTaken(AlreadyExists):
    reason = "CORPUS_ALREADY_EXISTS"

    def __init__(self, key: str) -> None:
        super().__init__("a corpus with this key already exists", metadata={"corpus_key": key[:200]})


class InvalidRequest(InvalidField):
    def __init__(self, message: str, *, field: str, reason: str | None = None, **metadata: str) -> None:
        super().__init__(field, message, reason=reason, **metadata)


class CorpusReadOnly(PermissionDenied):
    """A write into a corpus the caller reads but may not write: it is bound above the caller's
    node (runtime.reach.Access.READ_ONLY). The caller reads the corpus, so naming where it sits
    tells it nothing new; a corpus out of reach is CorpusNotFound instead."""

    reason = "CORPUS_READ_ONLY"

    def __init__(self, corpus_id: str, corpus_scope: ScopePath, caller_scope: ScopePath) -> None:
        super().__init__(
            f"corpus {corpus_id[:40]} is read-only for this token: it is bound to {str(corpus_scope)!r}, above the "
            f"token's scope {str(caller_scope)!r}; it is written only by a token scoped to {str(corpus_scope)!r}",
            metadata={"corpus_id": corpus_id[:40], "corpus_scope": str(corpus_scope), "scope": str(caller_scope)},
        )


class DocumentRefNotFound(DocumentNotFound):
    """A reference whose document the caller may not read (its access list does not admit it):
    absent to it, as a document by id is."""

    def __init__(self, document_ref: str) -> None:
        NotFound.__init__(self, "document not found", metadata={"document_ref": document_ref[:200]})


class JobNotFound(NotFound):
    reason = "INGEST_JOB_NOT_FOUND"

    def __init__(self, job_id: str) -> None:
        super().__init__("ingest job not found", metadata={"job_id": job_id[:40]})


class WebhookNotFound(NotFound):
    """No such webhook, or one the caller may not manage (``webhooks.may_manage``): the same answer."""

    reason = "WEBHOOK_NOT_FOUND"

    def __init__(self, webhook_id: str) -> None:
        super().__init__("webhook not found", metadata={"webhook_id": webhook_id[:40]})


class JobFinished(FailedPrecondition):
    reason = "INGEST_JOB_FINISHED"

    def __init__(self, state: str) -> None:
        super().__init__(f"the job already ended as {state}", metadata={"state": state})


class JobSuperseded(FailedPrecondition):
    """A retry of a version a later one replaced: the later request won, for good."""

    reason = "INGEST_JOB_FINISHED"

    def __init__(self, state: str) -> None:
        super().__init__(
            f"the job ended as {state} and a later version of its document superseded it; index that version again "
            "to make it the document's",
            metadata={"state": state},
        )


class PageOutOfRange(OutOfRange):
    reason = "PAGE_OUT_OF_RANGE"

    def __init__(self, page: int, page_count: int) -> None:
        super().__init__(
            f"page {page} is past the last page ({page_count})",
            metadata={"page": str(page), "page_count": str(page_count)},
        )


class JobSucceeded(FailedPrecondition):
    reason = "INGEST_JOB_SEARCHABLE"

    def __init__(self) -> None:
        super().__init__("the job already ended SEARCHABLE; nothing to retry (upload the file again to re-ingest it)")


class DocumentBusy(Refused):
    """New content for a document another job is still ingesting: INDEXING (waiting helps)."""

    def __init__(self, document_id: int, job_id: object) -> None:
        super().__init__(
            Refusal.INDEXING,
            f"document {document_id} is being ingested by job {job_id}; wait for it to end or cancel it, "
            "then send the content again",
            metadata={"document_id": str(document_id), "job_id": str(job_id)},
        )


class DocumentIndexing(Refused):
    """The text of a document whose first ingestion has not ended: there is none yet. INDEXING."""

    def __init__(self, document_id: int, stage: str) -> None:
        super().__init__(
            Refusal.INDEXING,
            f"document {document_id} is still being ingested ({stage or 'queued'}); its text can be read once "
            "it is searchable",
            metadata={"document_id": str(document_id)},
        )


class DocumentNotInCorpus(InvalidField):
    reason = "DOCUMENT_NOT_IN_CORPUS"

    def __init__(self, document_id: int, corpus_id: int) -> None:
        super().__init__(
            "corpus_id",
            f"document {document_id} is not in corpus {corpus_id}; leave corpus_id empty or give its own",
            document_id=str(document_id),
            corpus_id=str(corpus_id),
        )


class DependencyNotReady(Unavailable):
    """A service a job needs is starting or restarting (its connection is down, or it is stopping):
    not the job's failure, so it spends no attempt; workers wait for it to be ready."""

    reason = "DEPENDENCY_NOT_READY"

    def __init__(self, service: str) -> None:
        super().__init__(f"the {service} is starting or restarting", metadata={"service": service})
        self.service = service


class UrlRefused(InvalidArgument):
    """A URL ingest will not fetch (scheme, host, a private or loopback address)."""

    reason = "URL_REFUSED"

    def __init__(self, why: str) -> None:
        super().__init__(f"the URL is refused: {why}")


class FetchFailed(InvalidArgument):
    """The page could not be fetched: the site did not answer, answered an error, or too slowly."""

    reason = "URL_FETCH_FAILED"

    def __init__(self, why: str) -> None:
        super().__init__(f"the page could not be fetched: {why}")


class CursorExpired(OutOfRange):
    reason = "EVENT_CURSOR_EXPIRED"

    def __init__(self, after: int, first_retained: int) -> None:
        super().__init__(
            f"cursor {after} is older than the event retention: the events after it up to "
            f"{first_retained - 1} are gone; resynchronise (list the documents again) and watch from an empty cursor",
            metadata={"cursor": str(after), "first_retained_cursor": str(first_retained)},
        )


class CorpusNotEmpty(FailedPrecondition):
    """DeleteCorpus of a corpus that still holds documents, without delete_documents: the
    caller's choice to make, not a refusal."""

    reason = "CORPUS_NOT_EMPTY"

    def __init__(self, corpus_id: int, documents: int) -> None:
        super().__init__(
            f"corpus {corpus_id} holds {documents} document(s); delete them first, or ask to delete them "
            "with it (delete_documents=true)",
            metadata={"corpus_id": str(corpus_id), "document_count": str(documents)},
        )


class ModelChangeOpen(FailedPrecondition):
    reason = "MODEL_CHANGE_OPEN"

    def __init__(self, change_id: int) -> None:
        super().__init__(
            f"model change {change_id} is still open: finish, roll back or cancel it first",
            metadata={"change_id": str(change_id)},
        )


class ModelChangeNotFound(NotFound):
    reason = "MODEL_CHANGE_NOT_FOUND"

    def __init__(self, what: str = "there is no model change") -> None:
        super().__init__(what)


class EvaluationSetNotFound(NotFound):
    reason = "EVALUATION_SET_NOT_FOUND"

    def __init__(self, name: str) -> None:
        super().__init__(f"the tenant has no evaluation set {name[:80]!r}", metadata={"name": name[:80]})


class ModelChangeState(FailedPrecondition):
    reason = "MODEL_CHANGE_STATE"

    def __init__(self, change_id: int, state: str, message: str) -> None:
        super().__init__(message, metadata={"change_id": str(change_id), "state": state})


class ModelNotLoaded(FailedPrecondition):
    reason = "MODEL_NOT_LOADED"

    def __init__(self, model: str, message: str) -> None:
        super().__init__(message, metadata={"model": model[:120]})
