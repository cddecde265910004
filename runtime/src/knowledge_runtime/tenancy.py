"""Per-tenant enablement, quotas and budgets: the values and the decisions.

A tenant's settings are one row of ``tenant_settings`` (written by ingest's
``UpdateTenantSettings``, capability ``platform.admin``); a tenant without a row is enabled or
not by ``KNOWLEDGE_TENANTS_ENABLED_BY_DEFAULT`` and has no quotas. Every service reads the row
per request (``db/tenant_settings.py``), so a change takes effect on the next request on every
replica: there is no cache to expire.

The decisions are pure functions of the quotas and what the tenant has used: each answers the
:class:`Refused` to raise, or None. One function per checkpoint, so that the upload path, the
job steps and the answer path cannot disagree about what "over quota" means.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

from knowledge_runtime.auth import PLATFORM_ADMIN
from knowledge_runtime.errors import InvalidField
from knowledge_runtime.refusals import Refusal, Refused

# Platform administration is not a tenant's use of the service: it passes the enablement check
# (an operator whose own tenant is switched off can still switch tenants on). Blob GC spans every
# tenant (content-index's CollectGarbage, capability blob.admin) and is exempt for the same reason.
UNGATED_CAPABILITIES = frozenset({PLATFORM_ADMIN, "blob.admin"})

# A month as YYYY-MM (also the OpenAPI description's pattern for GetUsage's period); empty: now.
PERIOD_PATTERN = "^$|^[1-9][0-9]{3}-(0[1-9]|1[0-2])$"
_PERIOD = re.compile(r"^([1-9][0-9]{3})-(0[1-9]|1[0-2])$")


@dataclass(frozen=True, slots=True)
class Quotas:
    """What a tenant may hold and spend; None is unlimited."""

    max_documents: int | None = None
    max_bytes: int | None = None
    max_chunks: int | None = None
    max_embedding_tokens_per_month: int | None = None
    max_llm_cost_per_month: Decimal | None = None


UNLIMITED = Quotas()


@dataclass(frozen=True, slots=True)
class TenantSettings:
    tenant: str
    enabled: bool
    quotas: Quotas = UNLIMITED
    configured: bool = False  # False: no row, the deployment's default applies
    updated_by: str = ""
    update_time: datetime | None = None


@dataclass(frozen=True, slots=True)
class Holdings:
    """What a tenant holds now and has used in the current month (what quotas compare with)."""

    documents: int = 0
    bytes: int = 0
    chunks: int = 0
    embedding_tokens: int = 0  # this month
    llm_cost: Decimal = Decimal(0)  # this month


MAX_TENANT_CHARS = 200
MAX_LLM_BUDGET = 99_999_999  # what tenant_settings.max_llm_cost_per_month (numeric(14, 6)) holds, in whole units
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def check_tenant(tenant: str) -> str:
    """A tenant identifier an operator names (the tokens' tenant claim, as auth reads it)."""
    name = tenant.strip()
    if not name or len(name) > MAX_TENANT_CHARS or _CONTROL.search(name):
        raise InvalidField("tenant", f"tenant must be 1..{MAX_TENANT_CHARS} characters without control characters")
    return name


def check_quotas(quotas: Quotas) -> Quotas:
    for name in ("max_documents", "max_bytes", "max_chunks", "max_embedding_tokens_per_month"):
        value = getattr(quotas, name)
        if value is not None and value < 0:
            raise InvalidField(f"quotas.{name}", f"quotas.{name} must not be negative")
    cost = quotas.max_llm_cost_per_month
    if cost is not None and (not cost.is_finite() or cost < 0 or cost > MAX_LLM_BUDGET):
        raise InvalidField("quotas.max_llm_cost_per_month", "quotas.max_llm_cost_per_month must be 0..99999999")
    return quotas


def default_settings(tenant: str, enabled_by_default: bool) -> TenantSettings:
    return TenantSettings(tenant=tenant, enabled=enabled_by_default)


def enablement_refusal(settings: TenantSettings) -> Refused | None:
    if settings.enabled:
        return None
    return Refused(Refusal.FEATURE_DISABLED, "this tenant is not enabled on this deployment")


def _exhausted(what: str, used: int | Decimal, limit: int | Decimal) -> Refused:
    return Refused(
        Refusal.QUOTA_EXHAUSTED,
        f"the tenant's {what} quota is used up ({used} of {limit})",
        metadata={"quota": what, "used": str(used), "limit": str(limit)},
    )


def upload_refusal(quotas: Quotas, held: Holdings, adding_bytes: int = 0) -> Refused | None:
    """A new document of ``adding_bytes`` (0 while its size is not known yet): refused when the
    tenant already holds its maximum of documents, or the bytes would go over its maximum."""
    if quotas.max_documents is not None and held.documents >= quotas.max_documents:
        return _exhausted("max_documents", held.documents, quotas.max_documents)
    if quotas.max_bytes is not None and (
        held.bytes + adding_bytes > quotas.max_bytes or (adding_bytes == 0 and held.bytes >= quotas.max_bytes)
    ):
        return _exhausted("max_bytes", held.bytes, quotas.max_bytes)
    return None


def embedding_refusal(quotas: Quotas, held: Holdings, adding_chunks: int) -> Refused | None:
    """Before a document's chunks are embedded: its chunks must fit, and the month's embedding
    tokens must not be spent already."""
    if quotas.max_chunks is not None and held.chunks + adding_chunks > quotas.max_chunks:
        return _exhausted("max_chunks", held.chunks, quotas.max_chunks)
    limit = quotas.max_embedding_tokens_per_month
    if limit is not None and held.embedding_tokens >= limit:
        return _exhausted("max_embedding_tokens_per_month", held.embedding_tokens, limit)
    return None


def budget_refusal(quotas: Quotas, held: Holdings) -> Refused | None:
    """Before an LLM call: the month's LLM spend must be under the budget."""
    limit = quotas.max_llm_cost_per_month
    if limit is None or held.llm_cost < limit:
        return None
    return Refused(
        Refusal.BUDGET_EXHAUSTED,
        f"the tenant's LLM budget for this month is spent ({held.llm_cost} of {limit})",
        metadata={"used": str(held.llm_cost), "limit": str(limit)},
    )


# -- periods --------------------------------------------------------------------------------


def current_period(now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    return f"{now.year:04d}-{now.month:02d}"


def period_bounds(period: str) -> tuple[datetime, datetime]:
    """``YYYY-MM`` as the UTC instants [start of the month, start of the next)."""
    match = _PERIOD.fullmatch(period)
    if match is None:
        raise InvalidField("period", f"period must be a month as YYYY-MM, got {period!r}", reason="PERIOD_INVALID")
    year, month = int(match.group(1)), int(match.group(2))
    start = datetime(year, month, 1, tzinfo=UTC)
    if (year, month) == (9999, 12):  # the last month a datetime holds has no next one
        return start, datetime.max.replace(tzinfo=UTC)
    return start, datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
