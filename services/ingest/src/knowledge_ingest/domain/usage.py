"""A tenant's usage report (GetUsage): holdings now, spending in one month."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from knowledge_runtime.tenancy import Quotas


@dataclass(frozen=True, slots=True)
class UsageReport:
    period: str  # YYYY-MM
    documents: int
    stored_bytes: int
    chunks: int
    embedding_tokens: int
    embedding_cost: Decimal
    llm_tokens: int
    llm_cost: Decimal
    quotas: Quotas


@dataclass(frozen=True, slots=True)
class TenantTotals:
    """One line of the per-tenant metrics (``tenant`` is ``OTHER_TENANTS`` for the rest summed)."""

    tenant: str
    documents: int
    stored_bytes: int
    chunks: int


OTHER_TENANTS = "_other"


def bounded_totals(rows: list[TenantTotals], max_tenants: int) -> list[TenantTotals]:
    """The ``max_tenants`` largest tenants (by documents, then name) each on its own, the rest
    summed as one ``_other`` line: the metrics' tenant label takes at most ``max_tenants + 1``
    values, whatever the number of tenants."""
    ranked = sorted(rows, key=lambda t: (-t.documents, t.tenant))
    kept, rest = ranked[:max_tenants], ranked[max_tenants:]
    if rest:
        kept.append(
            TenantTotals(
                OTHER_TENANTS,
                sum(t.documents for t in rest),
                sum(t.stored_bytes for t in rest),
                sum(t.chunks for t in rest),
            )
        )
    return kept
