"""Per-tenant enablement, quotas and LLM budgets: the values every service reads, and the two
decisions more than one service makes (enablement, in every service's interceptor; the LLM budget,
in search and documents-ai). Ingest's own checkpoints (uploads, embedding) are ingest's domain.

A tenant's settings are one row of ``tenant_settings`` (written by ingest's
``UpdateTenantSettings``, capability ``platform.admin``); a tenant without a row is enabled or
not by ``KNOWLEDGE_TENANTS_ENABLED_BY_DEFAULT`` and has no quotas. Every service reads the row
per request (``db/tenant_settings.py``), so a change takes effect on the next request on every
replica: there is no cache to expire.

The decisions are pure functions of the settings and what the tenant has used: each answers the
:class:`Refused` to raise, or None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

from knowledge_runtime.auth import MODELS_ADMIN, PLATFORM_ADMIN
from knowledge_runtime.errors import InvalidField
from knowledge_runtime.refusals import Refusal, Refused

# Platform administration is not a tenant's use of the service: it passes the enablement check
# (an operator whose own tenant is switched off can still switch tenants on). Blob GC spans every
# tenant (content-index's CollectGarbage, capability blob.admin) and is exempt for the same reason,
# as is a change of the deployment's embedding model (models.admin).
UNGATED_CAPABILITIES = frozenset({PLATFORM_ADMIN, "blob.admin", MODELS_ADMIN})

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


# A tenant's plan names the features it includes (TenantSettings.features); a gated feature is
# refused with PLAN_REQUIRED to a tenant whose plan names others but not it. Names are the
# operator's (a plan may list what this deployment does not gate); the gated ones are these.
PLATFORM_INDEX = "platform_index"  # passages by reference (ingest's PassageService)
GATED_FEATURES = frozenset({PLATFORM_INDEX})
FEATURE_PATTERN = "^[a-z][a-z0-9_]{0,63}$"
_FEATURE = re.compile(FEATURE_PATTERN)
MAX_FEATURES = 100


@dataclass(frozen=True, slots=True)
class TenantSettings:
    tenant: str
    enabled: bool
    quotas: Quotas = UNLIMITED
    configured: bool = False  # False: no row, the deployment's default applies
    updated_by: str = ""
    update_time: datetime | None = None
    features: tuple[str, ...] = ()  # what its plan includes; empty: every feature


@dataclass(frozen=True, slots=True)
class Holdings:
    """What a tenant holds now and has used in the current month (what quotas compare with)."""

    documents: int = 0
    bytes: int = 0
    chunks: int = 0
    embedding_tokens: int = 0  # this month
    llm_cost: Decimal = Decimal(0)  # this month


def default_settings(tenant: str, enabled_by_default: bool) -> TenantSettings:
    return TenantSettings(tenant=tenant, enabled=enabled_by_default)


def enablement_refusal(settings: TenantSettings) -> Refused | None:
    if settings.enabled:
        return None
    return Refused(Refusal.FEATURE_DISABLED, "this tenant is not enabled on this deployment")


def plan_refusal(settings: TenantSettings, feature: str) -> Refused | None:
    """PLAN_REQUIRED when the tenant's plan names its features and ``feature`` is not among them."""
    if not settings.features or feature in settings.features:
        return None
    return Refused(
        Refusal.PLAN_REQUIRED,
        f"the tenant's plan does not include {feature}; an operator adds it to the tenant's settings (features)",
        metadata={"feature": feature},
    )


def check_features(features: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """The features an operator sets (lowercase names: letters, digits, "_"), sorted, once each;
    InvalidField naming one that is no name."""
    if len(features) > MAX_FEATURES:
        raise InvalidField("features", f"a plan names at most {MAX_FEATURES} features")
    for feature in features:
        if not _FEATURE.match(feature):
            raise InvalidField(
                "features",
                f"feature {feature[:60]!r} is no feature name (lowercase letters, digits, '_'); the gated ones are "
                + ", ".join(sorted(GATED_FEATURES)),
            )
    return tuple(sorted(set(features)))


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
        raise InvalidField("period", f"period must be a month as YYYY-MM, got {period!r}")
    year, month = int(match.group(1)), int(match.group(2))
    start = datetime(year, month, 1, tzinfo=UTC)
    if (year, month) == (9999, 12):  # the last month a datetime holds has no next one
        return start, datetime.max.replace(tzinfo=UTC)
    return start, datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
