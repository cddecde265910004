"""The per-tenant totals behind ``knowledge_tenant_*`` (metrics.py), refreshed in the background."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import structlog

from knowledge_ingest.domain.usage import TenantTotals, bounded_totals
from knowledge_ingest.metrics import TENANT_CHUNKS, TENANT_DOCUMENTS, TENANT_STORED_BYTES

log = structlog.get_logger("knowledge.ingest.metrics")


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
    every_s: float = 60.0
    _task: asyncio.Task | None = field(default=None, init=False)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def refresh(self) -> None:
        publish(await self.totals(), self.max_tenants)

    async def _loop(self) -> None:
        while True:
            try:
                await self.refresh()
            except Exception:  # noqa: BLE001 (the database away, say: the previous values stay until the next pass)
                log.warning("tenant_metrics_unavailable")
            await asyncio.sleep(self.every_s)
