"""The per-tenant totals behind ``knowledge_tenant_*``, refreshed in the background.

The tenant label is bounded: the KNOWLEDGE_METRICS_MAX_TENANTS largest tenants by documents each
get their own series, every other tenant is summed under tenant="_other"
(``domain.usage.bounded_totals``), so a deployment with 100,000 tenants still exports at most
MAX_TENANTS + 1 series per metric. Until the next refresh after a failed one, the previous values
stay."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from prometheus_client import Gauge

from knowledge_ingest.domain.usage import TenantTotals, bounded_totals

TENANT_DOCUMENTS = Gauge("knowledge_tenant_documents", "Documents a tenant holds (every state).", ["tenant"])
TENANT_STORED_BYTES = Gauge(
    "knowledge_tenant_stored_bytes", "Bytes of the files a tenant's documents hold (each blob once).", ["tenant"]
)
TENANT_CHUNKS = Gauge("knowledge_tenant_chunks", "Chunks of a tenant's documents.", ["tenant"])


def publish(totals: list[TenantTotals], max_tenants: int) -> None:
    """Replace every series: a tenant that left the largest ``max_tenants`` loses its own."""
    lines = bounded_totals(totals, max_tenants)
    for gauge in (TENANT_DOCUMENTS, TENANT_STORED_BYTES, TENANT_CHUNKS):
        gauge.clear()
    for line in lines:
        TENANT_DOCUMENTS.labels(tenant=line.tenant).set(line.documents)
        TENANT_STORED_BYTES.labels(tenant=line.tenant).set(line.stored_bytes)
        TENANT_CHUNKS.labels(tenant=line.tenant).set(line.chunks)


@dataclass
class TenantMetrics:
    totals: Callable[[], Awaitable[list[TenantTotals]]]
    max_tenants: int

    async def refresh(self) -> None:
        publish(await self.totals(), self.max_tenants)
