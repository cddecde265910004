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
    reason = "NOT_IMPLEMENTED"


class Cancelled(DomainError):
    code = "CANCELLED"
    reason = "CANCELLED"


class InvalidField(InvalidArgument):
    """One request field holds a value this service refuses; ``metadata["field"]`` names it.

    Each service's refusals of its own requests subclass this with their reason
    (``CORPUS_INVALID``, ``SEARCH_INVALID``...), so every one has the same shape.
    """

    def __init__(self, field: str, message: str, *, reason: str | None = None, **metadata: str) -> None:
        super().__init__(message, reason=reason, metadata={"field": field, **metadata})
        self.field = field


class UploadTooLarge(ResourceExhausted):
    """An upload, blob or text past ``KNOWLEDGE_MAX_UPLOAD_BYTES``; the same error in every service."""

    reason = "UPLOAD_TOO_LARGE"

    def __init__(self, max_bytes: int) -> None:
        super().__init__(f"the upload exceeds the limit of {max_bytes} bytes", metadata={"max_bytes": str(max_bytes)})
        self.max_bytes = max_bytes


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
        default_reason = dependency.upper().replace(" ", "_").replace("-", "_") + "_UNAVAILABLE"
        super().__init__(message, reason=reason or default_reason, metadata=metadata)
        if overloaded:
            self.code = "RESOURCE_EXHAUSTED"
