"""The closed set of refusals: the one place that says what each reason means.

A request is *refused* when it is well formed and may be valid, but the service will not do
it now for this caller: a switched-off tenant, a used-up quota, a missing capability, a scope
the token does not resolve, a model that is down. The set is closed and lives in the proto
(``knowledge.v1.RefusalReason``, a test keeps this table and the enum name for name); every
refusal a service raises is a :class:`Refused` with one of these reasons in its ``ErrorInfo``.
Invalid requests (``InvalidField``) and failures (``Internal``) are not refusals.

Each reason fixes its gRPC code (and so its HTTP status through the gateway), its meaning,
whether waiting can fix it (a job refused for a reason waiting cannot fix records the reason
on its document and is not retried), and the plain words the CLI prints.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from knowledge_runtime.errors import DomainError


class Refusal(StrEnum):
    """A reason of ``knowledge.v1.RefusalReason``, named as ``ErrorInfo.reason`` carries it."""

    FEATURE_DISABLED = "FEATURE_DISABLED"
    QUOTA_EXHAUSTED = "QUOTA_EXHAUSTED"
    BUDGET_EXHAUSTED = "BUDGET_EXHAUSTED"
    CAPABILITY_MISSING = "CAPABILITY_MISSING"
    SCOPE_UNRESOLVED = "SCOPE_UNRESOLVED"
    INDEXING = "INDEXING"
    APPROVAL_REQUIRED = "APPROVAL_REQUIRED"
    RUNTIME_UNAVAILABLE = "RUNTIME_UNAVAILABLE"
    PLAN_REQUIRED = "PLAN_REQUIRED"


# RUNTIME_UNAVAILABLE's ``runtime`` when the embedder's remote embedding server is down: its
# callers wait for it as for a restarting embedder.
EMBEDDING_SERVER = "embedding-server"


@dataclass(frozen=True, slots=True)
class RefusalSpec:
    code: str  # the gRPC status code's name
    http_status: int  # what the gateway answers for ``code``
    waiting_helps: bool
    meaning: str  # one line, for the README and OpenAPI
    plain: str  # what the CLI tells a person
    metadata: tuple[str, ...] = ()  # the ErrorInfo keys it may carry (knowledge_runtime.reasons.METADATA_KEYS)


REFUSALS: Mapping[Refusal, RefusalSpec] = {
    Refusal.FEATURE_DISABLED: RefusalSpec(
        "PERMISSION_DENIED",
        403,
        False,
        "the feature or the whole tenant is switched off by an operator",
        "this is switched off for your organisation; ask an administrator to enable it",
    ),
    Refusal.QUOTA_EXHAUSTED: RefusalSpec(
        "RESOURCE_EXHAUSTED",
        429,
        False,
        "a tenant quota (documents, bytes, chunks, embedding tokens) is used up",
        "your organisation's quota is used up; delete something or ask for a larger quota",
        ("quota", "used", "limit"),
    ),
    Refusal.BUDGET_EXHAUSTED: RefusalSpec(
        "RESOURCE_EXHAUSTED",
        429,
        False,
        "the tenant's model spending budget for the period is used up",
        "your organisation's model budget for this period is spent",
        ("used", "limit"),
    ),
    Refusal.CAPABILITY_MISSING: RefusalSpec(
        "PERMISSION_DENIED",
        403,
        False,
        "the token lacks the capability the call needs",
        "your token does not allow this; ask for a token with the capability named",
        ("capability",),
    ),
    Refusal.SCOPE_UNRESOLVED: RefusalSpec(
        "PERMISSION_DENIED",
        403,
        False,
        "the token names no scope, or a scope the tenant does not have; nothing is retrieved",
        "your token names no scope this organisation has, so nothing can be read",
        ("scope",),
    ),
    Refusal.INDEXING: RefusalSpec(
        "FAILED_PRECONDITION",
        400,
        True,
        "the resource is still being ingested",
        "this is still being ingested; try again when it is searchable",
        ("document_id", "job_id"),
    ),
    Refusal.APPROVAL_REQUIRED: RefusalSpec(
        "PERMISSION_DENIED",
        403,
        True,
        "the action needs a person's approval first",
        "this needs somebody's approval first",
    ),
    Refusal.RUNTIME_UNAVAILABLE: RefusalSpec(
        "UNAVAILABLE",
        503,
        True,
        "the embedder, or the model behind an answer (LLM, cross-encoder), is down or not configured",
        "the model service needed for this is down or not configured",
        ("runtime",),
    ),
    Refusal.PLAN_REQUIRED: RefusalSpec(
        "PERMISSION_DENIED",
        403,
        False,
        "the tenant's plan does not include the feature (its settings' features name what it does)",
        "your organisation's plan does not include this; ask an administrator to add it",
        ("feature",),
    ),
}


class Refused(DomainError):
    """A request refused for one reason of the closed set; its code follows from the reason."""

    def __init__(self, refusal: Refusal, message: str, *, metadata: Mapping[str, str] | None = None) -> None:
        super().__init__(message, reason=refusal.value, metadata=metadata)
        self.refusal = refusal
        self.code = REFUSALS[refusal].code

    @property
    def waiting_helps(self) -> bool:
        return REFUSALS[self.refusal].waiting_helps


def refusal_of(reason: str) -> Refusal | None:
    """The refusal an ``ErrorInfo.reason`` names, or None when it names no refusal."""
    try:
        return Refusal(reason)
    except ValueError:
        return None


def waiting_helps(reason: str) -> bool | None:
    """Whether waiting can fix a refusal with this reason; None when the reason is no refusal."""
    refusal = refusal_of(reason)
    return None if refusal is None else REFUSALS[refusal].waiting_helps


def refusals_markdown() -> str:
    """The set as a Markdown table (code, HTTP status, meaning, whether waiting helps): what the
    README and the OpenAPI description list, generated from REFUSALS so they cannot drift."""
    lines = [
        "| reason | gRPC code | HTTP | meaning | waiting helps |",
        "|---|---|---|---|---|",
    ]
    for refusal, spec in REFUSALS.items():
        waiting = "yes" if spec.waiting_helps else "no"
        lines.append(f"| `{refusal.value}` | {spec.code} | {spec.http_status} | {spec.meaning} | {waiting} |")
    return "\n".join(lines) + "\n"
