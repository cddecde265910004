"""Reading a tenant's settings and holdings from PostgreSQL (every service role may read them).

No cache: the read is one primary-key lookup (docs/operations.md, "Enablement", has the
measured cost), and a cache would make a replica serve a switched-off tenant until it expired.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime

import asyncpg

from knowledge_runtime.db.pool import Database, Transaction
from knowledge_runtime.refusals import Refused
from knowledge_runtime.tenancy import (
    Holdings,
    Quotas,
    TenantSettings,
    budget_refusal,
    current_period,
    default_settings,
    enablement_refusal,
    period_bounds,
)

SETTINGS = """
SELECT tenant_id, enabled, max_documents, max_bytes, max_chunks, max_embedding_tokens_per_month,
       max_llm_cost_per_month, updated_by, update_time, features
FROM tenant_settings WHERE tenant_id = $1
"""
ENABLED = "SELECT enabled FROM tenant_settings WHERE tenant_id = $1"
LLM_COST_SINCE = """
SELECT coalesce(sum(cost), 0) FROM cost_records WHERE tenant_id = $1 AND operation = 'chat' AND create_time >= $2
"""


def settings_from_row(row: asyncpg.Record) -> TenantSettings:
    return TenantSettings(
        tenant=row["tenant_id"],
        enabled=row["enabled"],
        quotas=Quotas(
            max_documents=row["max_documents"],
            max_bytes=row["max_bytes"],
            max_chunks=row["max_chunks"],
            max_embedding_tokens_per_month=row["max_embedding_tokens_per_month"],
            max_llm_cost_per_month=row["max_llm_cost_per_month"],
        ),
        configured=True,
        updated_by=row["updated_by"],
        update_time=row["update_time"],
        features=tuple(row["features"]),
    )


class TenantSettingsReader:
    """A tenant's settings, or the deployment's default for a tenant never configured."""

    def __init__(self, db: Database | Transaction, enabled_by_default: bool) -> None:
        self._db = db
        self.enabled_by_default = enabled_by_default

    async def settings(self, tenant: str) -> TenantSettings:
        row = await self._db.fetchrow("tenant_settings", SETTINGS, tenant)
        return default_settings(tenant, self.enabled_by_default) if row is None else settings_from_row(row)

    async def check_enabled(self, tenant: str) -> None:
        """FEATURE_DISABLED for a switched-off tenant (the gate every service's interceptor runs)."""
        enabled = await self._db.fetchval("tenant_enabled", ENABLED, tenant)
        refusal = enablement_refusal(
            default_settings(tenant, self.enabled_by_default if enabled is None else bool(enabled))
        )
        if refusal is not None:
            raise refusal


async def llm_cost_since(db: Database | Transaction, tenant: str, month_start: datetime) -> Holdings:
    """Only the month's LLM spend (search's role reads cost_records, not blobs)."""
    cost = await db.fetchval("tenant_llm_cost", LLM_COST_SINCE, tenant, month_start)
    return Holdings(llm_cost=cost)


class PostgresLlmBudget:
    """The tenant's LLM budget against its spend this month, read per call: search
    before an answer, documents-ai before a use case's first chat. Needs SELECT on
    tenant_settings and cost_records."""

    def __init__(self, db: Database) -> None:
        self._reader = TenantSettingsReader(db, enabled_by_default=True)  # only the quotas are read
        self._db = db

    async def refusal(self, tenant: str) -> Refused | None:
        """BUDGET_EXHAUSTED when the tenant's LLM spend this month has reached its budget."""
        quotas = (await self._reader.settings(tenant)).quotas
        if quotas.max_llm_cost_per_month is None:
            return None
        held = await llm_cost_since(self._db, tenant, period_bounds(current_period())[0])
        return budget_refusal(quotas, held)


def enablement_gate(db: Database, enabled_by_default: bool) -> Callable[[str], Awaitable[None]]:
    """What a service hands ``GrpcApp(tenant_gate=...)``: the enablement check on its own pool."""
    return TenantSettingsReader(db, enabled_by_default).check_enabled
