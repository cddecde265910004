"""Tenant settings (platform administration), usage, and the quota checks of uploads and jobs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, Protocol

from knowledge_runtime.auth import USAGE_ADMIN, Scope
from knowledge_runtime.reach import Placement, Reader
from knowledge_runtime.refusals import Refused
from knowledge_runtime.tenancy import (
    UNLIMITED,
    Holdings,
    Quotas,
    TenantSettings,
    check_features,
    current_period,
    period_bounds,
    plan_refusal,
)

from knowledge_ingest.domain.quotas import (
    check_quotas,
    check_tenant,
    embedding_refusal,
    index_refusal,
    upload_refusal,
)
from knowledge_ingest.domain.usage import TenantTotals, UsageReport, counted_corpora


class TenantStore(Protocol):
    async def settings(self, tenant: str) -> TenantSettings: ...

    async def put(self, settings: TenantSettings) -> TenantSettings: ...

    async def holdings(self, tenant: str, month_start: datetime, except_document: int | None = None) -> Holdings: ...

    async def corpus_holdings(self, tenant: str, corpus_ids: frozenset[int]) -> Holdings:
        """What the tenant's documents in ``corpus_ids`` hold now (no spending)."""

    async def spending(self, tenant: str, start: datetime, end: datetime) -> dict[str, Any]: ...

    async def totals(self) -> list[TenantTotals]: ...


class Placements(Protocol):
    """The caller's resolved reader and where the tenant's corpora sit (runtime.db.reach)."""

    async def reader(self, scope: Scope) -> Reader: ...

    async def placements(self, tenant: str) -> list[Placement]: ...


def _month_start() -> datetime:
    return period_bounds(current_period())[0]


@dataclass
class TenantUseCases:
    store: TenantStore
    reach: Placements

    async def get_settings(self, scope: Scope, tenant: str) -> TenantSettings:
        return await self.store.settings(check_tenant(tenant))

    async def update_settings(
        self, scope: Scope, tenant: str, enabled: bool, quotas: Quotas, features: Sequence[str] = ()
    ) -> TenantSettings:
        settings = TenantSettings(
            tenant=check_tenant(tenant),
            enabled=enabled,
            quotas=check_quotas(quotas),
            updated_by=scope.subject,
            features=check_features(tuple(features)),
        )
        return await self.store.put(settings)

    async def usage(self, scope: Scope, period: str) -> UsageReport:
        """The whole tenant's usage for a ``usage.admin`` token; for any other, what the corpora
        of its node and below hold in bands it reads, without spending (``domain.usage``)."""
        period = period or current_period()  # exactly as sent: " 2026-12" is no month
        start, end = period_bounds(period)
        settings = await self.store.settings(scope.tenant)
        if USAGE_ADMIN not in scope.capabilities:
            reader = await self.reach.reader(scope)
            counted = counted_corpora(reader, await self.reach.placements(scope.tenant))
            part = await self.store.corpus_holdings(scope.tenant, counted)
            return UsageReport(
                period=period,
                documents=part.documents,
                stored_bytes=part.bytes,
                chunks=part.chunks,
                embedding_tokens=0,
                embedding_cost=Decimal(0),
                llm_tokens=0,
                llm_cost=Decimal(0),
                quotas=settings.quotas,
                scope=reader.node,
            )
        held = await self.store.holdings(scope.tenant, start)
        spent = await self.store.spending(scope.tenant, start, end)
        return UsageReport(
            period=period,
            documents=held.documents,
            stored_bytes=held.bytes,
            chunks=held.chunks,
            embedding_tokens=spent["embedding_tokens"],
            embedding_cost=Decimal(spent["embedding_cost"]),
            llm_tokens=spent["llm_tokens"],
            llm_cost=Decimal(spent["llm_cost"]),
            quotas=settings.quotas,
        )


@dataclass
class QuotaChecks:
    """Before each costly step: the upload (before any byte is stored), extraction, embedding.
    Each raises the decision's refusal (QUOTA_EXHAUSTED); a job records it on its document."""

    store: TenantStore

    async def before_upload(self, tenant: str) -> None:
        quotas = (await self.store.settings(tenant)).quotas
        if quotas.max_documents is None and quotas.max_bytes is None:
            return
        refusal = upload_refusal(quotas, await self.store.holdings(tenant, _month_start()))
        if refusal is not None:
            raise refusal

    async def embedding_quotas(self, tenant: str) -> Quotas | None:
        """The tenant's quotas when one bounds embedding, else None: read once per job, for both
        of its checks (before extraction and before embedding)."""
        quotas = (await self.store.settings(tenant)).quotas
        if quotas.max_chunks is None and quotas.max_embedding_tokens_per_month is None:
            return None
        return quotas

    async def require_plan(self, tenant: str, feature: str) -> None:
        """PLAN_REQUIRED unless the tenant's plan includes ``feature``."""
        refusal = plan_refusal(await self.store.settings(tenant), feature)
        if refusal is not None:
            raise refusal

    async def index_refusal(
        self, tenant: str, feature: str, document_id: int | None, adding_bytes: int, adding_chunks: int
    ) -> Refused | None:
        """What an index of passages would be refused for now (a plan without the feature, a quota),
        or None: one read of the settings and, when a quota bounds it, of the holdings."""
        settings = await self.store.settings(tenant)
        refusal = plan_refusal(settings, feature)
        if refusal is not None or settings.quotas == UNLIMITED:
            return refusal
        held = await self.store.holdings(tenant, _month_start(), except_document=document_id)
        return index_refusal(
            settings.quotas,
            held,
            new_document=document_id is None,
            adding_bytes=adding_bytes,
            adding_chunks=adding_chunks,
        )

    async def before_embedding(self, tenant: str, document_id: int, chunks: int, quotas: Quotas | None) -> None:
        """``quotas``: what ``embedding_quotas`` read for this job (None: nothing to check)."""
        if quotas is None:
            return
        held = await self.store.holdings(tenant, _month_start(), except_document=document_id)
        refusal = embedding_refusal(quotas, held, chunks)
        if refusal is not None:
            raise refusal
