"""A callee's gRPC error as the caller's domain error: the one translation every client uses.

A service that calls another one (ingest → content-index and the embedder, search → the
embedder) raises what this returns, so its own callers see the callee's cause through it:
the same code, and the callee's ``ErrorInfo`` reason and metadata (``UPLOAD_TOO_LARGE``,
``EMBEDDER_OVERLOADED``, ``CAPABILITY_MISSING``...). Two exceptions to "the same":

- a refusal of the closed set (``knowledge_runtime.refusals``) stays that :class:`Refused`,
  whatever its code, so its caller decides by the refusal whether waiting helps;
- a failure that may pass (UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED, RESOURCE_EXHAUSTED other
  than an upload over the cap or a refusal) is a :class:`DependencyUnavailable`, which callers retry;
- a status without our ``ErrorInfo`` (the channel's own, e.g. "failed to connect to all
  addresses; ..." with the callee's address) keeps its code but not its text, which is not
  written for callers: the message names the dependency, the reason is the code's name.
"""

from __future__ import annotations

from collections.abc import Collection

import grpc
from google.rpc import error_details_pb2, status_pb2

from knowledge_runtime.errors import (
    ERROR_DOMAIN,
    AlreadyExists,
    Cancelled,
    DependencyUnavailable,
    DomainError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    OutOfRange,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    UploadTooLarge,
)
from knowledge_runtime.refusals import REFUSALS, Refused, refusal_of

_RETRYABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.ABORTED})
# The passing failures (what domain_error_from makes a DependencyUnavailable of, without a callee's
# ErrorInfo): a callee that could not be reached, dropped the call, or did not answer in time.
PASSING = _RETRYABLE | {grpc.StatusCode.RESOURCE_EXHAUSTED}
_BY_CODE: dict[grpc.StatusCode, type[DomainError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.OUT_OF_RANGE: OutOfRange,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.CANCELLED: Cancelled,
}


def callee_error_info(error: grpc.aio.AioRpcError) -> error_details_pb2.ErrorInfo | None:
    """The ``ErrorInfo`` of our domain in the callee's ``google.rpc.Status``, if it sent one."""
    raw = dict(error.trailing_metadata() or ()).get("grpc-status-details-bin")
    if not raw:
        return None
    try:
        status = status_pb2.Status.FromString(raw)
    except Exception:  # noqa: BLE001 - a malformed trailer is as good as none
        return None
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info) and info.domain == ERROR_DOMAIN:
            return info
    return None


def made_by_channel(error: grpc.aio.AioRpcError, codes: Collection[grpc.StatusCode] = PASSING) -> bool:
    """Whether ``error`` is a status the channel made, not the callee (no ``ErrorInfo`` of ours),
    among ``codes``: by default the passing failures, so the callee gave no answer at all
    (down, unreachable, timed out), which a caller may tell apart from what the callee answered."""
    return error.code() in codes and callee_error_info(error) is None


def domain_error_from(error: grpc.aio.AioRpcError, dependency: str) -> DomainError:
    """``error``, raised by a call to ``dependency`` ("content index", "embedder"), as a domain error."""
    code = error.code()
    info = callee_error_info(error)
    reason = info.reason if info is not None and _is_reason(info.reason) else None
    metadata = dict(info.metadata) if info is not None and reason is not None else {}
    if reason == UploadTooLarge.reason and _is_count(metadata.get("max_bytes", "")):
        return UploadTooLarge(int(metadata["max_bytes"]))  # a cap, not a passing failure: never retried
    refusal = refusal_of(reason) if reason is not None else None
    if refusal is not None and REFUSALS[refusal].code == code.name:
        # The closed set's refusal, as the callee raised it, whatever its code: whether waiting
        # helps is the refusal's to say (a used-up quota is RESOURCE_EXHAUSTED but no passing failure).
        return Refused(refusal, error.details() or f"the {dependency} refused", metadata=metadata)
    if code in _RETRYABLE or (code == grpc.StatusCode.RESOURCE_EXHAUSTED and reason != UploadTooLarge.reason):
        return DependencyUnavailable(
            dependency, overloaded=code == grpc.StatusCode.RESOURCE_EXHAUSTED, reason=reason, metadata=metadata
        )
    if reason is None:
        message, reason = f"the {dependency} failed ({code.name})", code.name
    else:
        message = error.details() or f"the {dependency} failed"
    kind = _BY_CODE.get(code, DomainError)
    translated: DomainError = kind(message, reason=reason, metadata=metadata)
    translated.code = code.name  # grpc's status codes are google.rpc.Code's, name for name
    return translated


def _is_count(value: str) -> bool:
    return value.isascii() and value.isdigit()


def _is_reason(value: str) -> bool:
    return bool(value) and value.isupper() and value.replace("_", "").isalnum()
