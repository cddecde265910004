"""A tenant's usage report (GetUsage): holdings now, spending in one month.

The whole tenant's figures are for its administrators (``usage.admin``); any other caller is
told what the corpora of its own node and below hold, in bands its clearance reads
(:func:`counted_corpora`), and no spending: cost records are the tenant's, kept per model call,
not per corpus or node, so they cannot be cut to a caller's part of the tree.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from knowledge_runtime.reach import Placement, Reader, ScopePath, allows
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
    scope: ScopePath | None = None  # the node whose subtree is counted; None: the whole tenant


def counted_corpora(reader: Reader, placements: Iterable[Placement]) -> frozenset[int]:
    """The corpora a usage report that is not tenant-wide counts: the tenant's own bound at the
    reader's node or below (the part of the tree it answers for), in bands its clearance reads.
    Never a platform-wide corpus (the platform tenant's holdings) and never a sibling's."""
    return frozenset(
        p.corpus_id
        for p in placements
        if not p.platform and p.node.is_within(reader.node) and allows(reader.clearance, p.band)
    )


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
