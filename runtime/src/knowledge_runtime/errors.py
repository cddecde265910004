"""Domain errors shared by every service.

Each class declares the gRPC status code it maps to (by name, so domain code needs no
``grpc`` import) and a default UPPER_SNAKE ``reason``. The error interceptor is the one
place that turns them into a ``google.rpc.Status`` with a single ``ErrorInfo``.
Messages are shown to callers: they must never carry internals, secrets or document text.
"""

from __future__ import annotations

from collections.abc import Mapping

ERROR_DOMAIN = "knowledge.v1"


class DomainError(Exception):
    """Base of every error a caller may see. Subclasses pick the code; callers pick the reason."""

    code: str = "FAILED_PRECONDITION"
    reason: str = "FAILED_PRECONDITION"

    def __init__(
        self,
        message: str,
        *,
        reason: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if reason is not None:
            if not reason.isupper() or not reason.replace("_", "").isalnum():
                raise ValueError(f"reason must be UPPER_SNAKE, got {reason!r}")
            self.reason = reason
        self.metadata: dict[str, str] = dict(metadata or {})


class InvalidArgument(DomainError):
    code = "INVALID_ARGUMENT"
    reason = "INVALID_ARGUMENT"


class NotFound(DomainError):
    """Also what another tenant's resource answers: 404, never 403."""

    code = "NOT_FOUND"
    reason = "NOT_FOUND"


class AlreadyExists(DomainError):
    code = "ALREADY_EXISTS"
    reason = "ALREADY_EXISTS"


class FailedPrecondition(DomainError):
    code = "FAILED_PRECONDITION"
    reason = "FAILED_PRECONDITION"


class OutOfRange(DomainError):
    """A position past the end of something that exists (a page after the last)."""

    code = "OUT_OF_RANGE"
    reason = "OUT_OF_RANGE"


class ResourceExhausted(DomainError):
    code = "RESOURCE_EXHAUSTED"
    reason = "RESOURCE_EXHAUSTED"


class Unauthenticated(DomainError):
    code = "UNAUTHENTICATED"
    reason = "UNAUTHENTICATED"


class PermissionDenied(DomainError):
    code = "PERMISSION_DENIED"
    reason = "PERMISSION_DENIED"


class Unavailable(DomainError):
    """A dependency (database, another service) is down; callers may retry."""

    code = "UNAVAILABLE"
    reason = "DEPENDENCY_UNAVAILABLE"


class Internal(DomainError):
    """What an unexpected exception becomes; its message never says more than this."""

    code = "INTERNAL"
    reason = "INTERNAL"


class Unimplemented(DomainError):
    code = "UNIMPLEMENTED"
    reason = "UNIMPLEMENTED"


class Cancelled(DomainError):
    code = "CANCELLED"
    reason = "CANCELLED"


class InvalidField(InvalidArgument):
    """One request field holds a value this service refuses; ``metadata["field"]`` names it.

    ``INVALID_REQUEST`` in every service, so a client has one reason to handle for a wrong value;
    a subclass names a reason of its own only where the client has something else to do about it
    (``knowledge_runtime.reasons`` says which).
    """

    reason = "INVALID_REQUEST"

    def __init__(self, field: str, message: str, *, reason: str | None = None, **metadata: str) -> None:
        super().__init__(message, reason=reason, metadata={"field": field, **metadata})
        self.field = field


class UploadTooLarge(ResourceExhausted):
    """An upload, blob or text past ``KNOWLEDGE_MAX_UPLOAD_BYTES``; the same error in every service,
    and the gateway's own answer to a body over the cap (413) says the same."""

    reason = "UPLOAD_TOO_LARGE"

    def __init__(self, max_bytes: int) -> None:
        super().__init__(upload_too_large_message(max_bytes), metadata={"max_bytes": str(max_bytes)})
        self.max_bytes = max_bytes


def upload_too_large_message(max_bytes: int) -> str:
    return f"the upload exceeds the limit of {max_bytes} bytes"


class CorpusNotFound(NotFound):
    """Also what another tenant's corpus, or one out of the caller's reach, answers."""

    reason = "CORPUS_NOT_FOUND"

    def __init__(self, corpus_id: str) -> None:
        super().__init__("corpus not found", metadata={"corpus_id": str(corpus_id)[:40]})


class CorpusKeyNotFound(CorpusNotFound):
    """A key that names no corpus in the caller's reach (it may name one elsewhere in the tree)."""

    def __init__(self, key: str) -> None:
        NotFound.__init__(self, "corpus not found", metadata={"corpus_key": key[:200]})


class DocumentNotFound(NotFound):
    """Also what another tenant's document, or one out of the caller's reach, answers; every
    service names the id asked for, as GetDocument does."""

    reason = "DOCUMENT_NOT_FOUND"

    def __init__(self, document_id: str) -> None:
        super().__init__("document not found", metadata={"document_id": str(document_id)[:40]})


class DependencyUnavailable(Unavailable):
    """Another service cannot answer now (down, timed out, aborted or overloaded): the caller may retry.

    An :class:`Unavailable` whatever the callee answered, so a caller's retry rule (ingest's
    pipeline) has one type to catch; an overloaded callee keeps RESOURCE_EXHAUSTED for the
    caller's own caller, so it backs off instead of retrying at once.
    """

    def __init__(
        self,
        dependency: str,
        *,
        overloaded: bool = False,
        reason: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        message = f"the {dependency} is overloaded; retry later" if overloaded else f"the {dependency} is unavailable"
        super().__init__(message, reason=reason or dependency_reason(dependency, overloaded), metadata=metadata)
        if overloaded:
            self.code = "RESOURCE_EXHAUSTED"


def dependency_reason(dependency: str, overloaded: bool = False) -> str:
    """``EMBEDDER_UNAVAILABLE`` for "embedder", ``CONTENT_INDEX_OVERLOADED`` for an overloaded
    "content index": the reason of a dependency that did not say its own."""
    name = dependency.upper().replace(" ", "_").replace("-", "_")
    return f"{name}_OVERLOADED" if overloaded else f"{name}_UNAVAILABLE"
