"""Anchors and cost records in PostgreSQL (role knowledge_embedder); it never writes chunks."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import numpy as np
from knowledge_runtime.costs import COST_RECORD_COLUMNS, RECORD_COST
from knowledge_runtime.db.pool import Database, Transaction
from knowledge_runtime.settings import SettingsError

from knowledge_embedder.domain.model import AnchorMatch, AnchorTarget, CostLine

EMBEDDING_TYPE = """
SELECT format_type(a.atttypid, a.atttypmod)
FROM pg_attribute a
WHERE a.attrelid = to_regclass('chunks') AND a.attname = 'embedding'
"""
UPSERT_ANCHOR = """
INSERT INTO anchors (tenant_id, entity_type, entity_id, embedding, content_chars)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (tenant_id, entity_type, entity_id)
DO UPDATE SET embedding = EXCLUDED.embedding, content_chars = EXCLUDED.content_chars, update_time = now()
RETURNING anchor_id
"""
ANCHOR_EXISTS = "SELECT EXISTS (SELECT 1 FROM anchors WHERE tenant_id = $1 AND entity_type = $2 AND entity_id = $3)"
REPLACE_ANCHOR = """
UPDATE anchors SET embedding = $4, content_chars = $5, update_time = now()
WHERE tenant_id = $1 AND entity_type = $2 AND entity_id = $3
RETURNING anchor_id
"""
NEAREST_ANCHORS = """
SELECT entity_type, entity_id, 1 - (embedding <=> $2) AS score
FROM anchors
WHERE tenant_id = $1 AND ($3 = '' OR entity_type = $3)
ORDER BY embedding <=> $2
LIMIT $4
"""
INSERT_COSTS = f"""
INSERT INTO cost_records ({COST_RECORD_COLUMNS})
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::bigint[], $6::numeric[])
"""


async def check_dimension(db: Database, dimension: int) -> None:
    """Fail at start, by name, when the model's vectors do not fit the schema's columns."""
    column = await db.fetchval("embedding_type", EMBEDDING_TYPE)
    if column is None:
        raise SettingsError("KNOWLEDGE_DATABASE_URL: the schema is missing; run `knowledge migrate` first")
    if column != f"vector({dimension})":
        raise SettingsError(
            f"KNOWLEDGE_EMBEDDING_MODEL: the model makes {dimension}-dimensional vectors but the database stores "
            f"{column}; configure the model the database was migrated for, or migrate a new database"
        )


class CostLedger:
    """Cost records written in groups: callers that arrive while a write is in flight share the
    next one, so a burst of small requests costs a few inserts and commits, not one each. Every
    caller still returns only once its record is stored."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._pending: list[tuple[str, CostLine, asyncio.Future]] = []
        self._writer: asyncio.Task | None = None

    async def record(self, tenant: str, cost: CostLine) -> None:
        future = asyncio.get_running_loop().create_future()
        self._pending.append((tenant, cost, future))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_all(), name="embedder-cost-ledger")
        # A caller that goes away still leaves its record: the forward pass was spent.
        await asyncio.shield(future)

    async def _write_all(self) -> None:
        while self._pending:
            group, self._pending = self._pending, []
            costs = [cost for _, cost, _ in group]
            try:
                await self._db.execute(
                    "insert_costs",
                    INSERT_COSTS,
                    [tenant for tenant, _, _ in group],
                    [c.model for c in costs],
                    [c.operation for c in costs],
                    [c.texts for c in costs],
                    [c.tokens for c in costs],
                    [Decimal(str(c.amount)) for c in costs],
                )
            except Exception as error:  # noqa: BLE001 - handed to the caller or logged, never swallowed silently
                for _, _, future in group:
                    if not future.done():
                        future.set_exception(error)
            else:
                for _, _, future in group:
                    if not future.done():
                        future.set_result(None)


class PostgresEmbeddings:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._ledger = CostLedger(db)

    async def upsert_anchor(
        self, tenant: str, target: AnchorTarget, vector: np.ndarray, content_chars: int, cost: CostLine
    ) -> int:
        async with self._db.transaction() as tx:
            anchor_id = await tx.fetchval(
                "upsert_anchor", UPSERT_ANCHOR, tenant, target.entity_type, target.entity_id, vector, content_chars
            )
            await _record(tx, tenant, cost)
        return anchor_id

    async def anchor_exists(self, tenant: str, target: AnchorTarget) -> bool:
        return bool(
            await self._db.fetchval("anchor_exists", ANCHOR_EXISTS, tenant, target.entity_type, target.entity_id)
        )

    async def replace_anchor(
        self, tenant: str, target: AnchorTarget, vector: np.ndarray, content_chars: int, cost: CostLine
    ) -> int | None:
        async with self._db.transaction() as tx:
            anchor_id = await tx.fetchval(
                "replace_anchor", REPLACE_ANCHOR, tenant, target.entity_type, target.entity_id, vector, content_chars
            )
            await _record(tx, tenant, cost)  # the forward pass was spent either way
        return anchor_id

    async def nearest_anchors(
        self, tenant: str, vector: np.ndarray, entity_type: str, top_k: int, cost: CostLine
    ) -> list[AnchorMatch]:
        rows = await self._db.fetch("nearest_anchors", NEAREST_ANCHORS, tenant, vector, entity_type, top_k)
        await self._ledger.record(tenant, cost)
        return [
            AnchorMatch(
                target=AnchorTarget(row["entity_type"], row["entity_id"]), score=min(max(float(row["score"]), 0.0), 1.0)
            )
            for row in rows
        ]

    async def record_cost(self, tenant: str, cost: CostLine) -> None:
        await self._ledger.record(tenant, cost)


async def _record(db: Database | Transaction, tenant: str, cost: CostLine) -> None:
    await db.execute(
        "insert_cost",
        RECORD_COST,
        tenant,
        cost.model,
        cost.operation,
        cost.texts,
        cost.tokens,
        Decimal(str(cost.amount)),
    )
