"""The model change in PostgreSQL: ``embedding_stores`` (which store search reads, which model
each holds), ``model_changes`` and the vector stores (``chunks.embedding``,
``chunk_vectors_next``). Every transition locks the ``embedding_stores`` row, as does every
transaction that stores chunks (``jobs/queue.py``), so a swap and a document's chunks never cross.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, replace

import asyncpg
import numpy as np
from knowledge_runtime.db.pool import Database, Transaction
from knowledge_runtime.reach import Band
from pgvector import Vector

from knowledge_ingest.domain.evaluation import EvaluationSet, JudgedQuery
from knowledge_ingest.domain.model_change import (
    CHUNKS_STORE,
    ChangeState,
    Figures,
    ModeFigures,
    ModelChange,
    Stores,
    change_event,
    figures_record,
)
from knowledge_ingest.events.outbox import publish

STORES = "SELECT current_store, chunks_model, next_model FROM embedding_stores"
LOCK_STORES = STORES + " FOR UPDATE"
SHARE_STORES = STORES + " FOR SHARE"
CHUNKS_DIMENSION = """
SELECT a.atttypmod FROM pg_attribute a
WHERE a.attrelid = 'chunks'::regclass AND a.attname = 'embedding'
"""
_CHANGE_COLUMNS = """change_id, from_model, from_store, to_model, to_store, to_dimension, state, chunks_done, forced,
       gate_why, figures, extract(epoch FROM create_time) AS create_s, extract(epoch FROM swap_time) AS swap_s,
       extract(epoch FROM end_time) AS end_s, cursor_chunk_id, tenant_id"""
LATEST_CHANGE = f"SELECT {_CHANGE_COLUMNS} FROM model_changes ORDER BY change_id DESC LIMIT 1"
OPEN_STATES_SQL = "('re_embedding', 'evaluating', 'held', 'swapped')"
OPEN_CHANGE = f"SELECT {_CHANGE_COLUMNS} FROM model_changes WHERE state IN {OPEN_STATES_SQL}"
INSERT_CHANGE = f"""
INSERT INTO model_changes (from_model, from_store, to_model, to_store, to_dimension, state, requested_by, tenant_id)
VALUES ($1, $2, $3, $4, $5, 're_embedding', $6, $7)
RETURNING {_CHANGE_COLUMNS}
"""
SET_STATE = f"""
UPDATE model_changes SET state = $2, update_time = now(),
    swap_time = CASE WHEN $2 = 'swapped' THEN now() ELSE swap_time END,
    end_time = CASE WHEN $2 IN ('rolled_back', 'finished', 'cancelled') THEN now() ELSE end_time END,
    forced = forced OR $3, gate_why = coalesce($4, gate_why), figures = coalesce($5::jsonb, figures)
WHERE change_id = $1
RETURNING {_CHANGE_COLUMNS}
"""
# One replica evaluates a change at a time: a transaction-level advisory lock on the change, held
# while its sets run; a replica that dies lets it go with its connection.
CLAIM_EVALUATION = "SELECT pg_try_advisory_xact_lock(hashtextextended('model-change-evaluation:' || $1::bigint, 0))"
ENSURE_TENANT = "INSERT INTO tenants (tenant_id) VALUES ($1) ON CONFLICT (tenant_id) DO NOTHING"
# A change's events name no corpus: they are placed at the root of the operator's tenant, in the
# band every reader of the tenant's own material reads.
PLACE_EVENTS = (
    "UPDATE events SET scope_path = '/', confidentiality = 'TENANT', corpus_system = false WHERE event_id = ANY($1)"
)
SET_STORES = """
UPDATE embedding_stores SET current_store = $1, chunks_model = $2, next_model = $3,
    next_dimension = CASE WHEN $3::text IS NULL THEN NULL ELSE coalesce($4, next_dimension) END, update_time = now()
"""
COUNT_CHUNKS = "SELECT count(*) FROM chunks"
COUNT_NEXT = "SELECT count(*) FROM chunk_vectors_next"
COUNT_CHUNKS_VECTORS = "SELECT count(*) FROM chunks WHERE embedding IS NOT NULL"
# The chunks after the cursor that lack the store's vector, in order.
MISSING_NEXT = """
SELECT c.chunk_id, c.tenant_id, c.content FROM chunks c
WHERE c.chunk_id > $1 AND NOT EXISTS (SELECT 1 FROM chunk_vectors_next v WHERE v.chunk_id = c.chunk_id)
ORDER BY c.chunk_id LIMIT $2
"""
MISSING_CHUNKS = """
SELECT c.chunk_id, c.tenant_id, c.content FROM chunks c
WHERE c.chunk_id > $1 AND c.embedding IS NULL
ORDER BY c.chunk_id LIMIT $2
"""
WRITE_NEXT = """
INSERT INTO chunk_vectors_next (chunk_id, embedding)
SELECT x.chunk_id, x.embedding FROM unnest($1::bigint[], $2::vector[]) AS x(chunk_id, embedding)
JOIN chunks c ON c.chunk_id = x.chunk_id
ON CONFLICT (chunk_id) DO NOTHING
"""
WRITE_CHUNKS = """
UPDATE chunks c SET embedding = x.embedding
FROM unnest($1::bigint[], $2::vector[]) AS x(chunk_id, embedding)
WHERE c.chunk_id = x.chunk_id AND c.embedding IS NULL
"""
ADVANCE = """
UPDATE model_changes SET chunks_done = chunks_done + $2, cursor_chunk_id = greatest(cursor_chunk_id, $3),
    update_time = now()
WHERE change_id = $1 AND state IN ('re_embedding', 'evaluating', 'held', 'swapped')
RETURNING 1
"""
# A dropped chunks store is emptied a batch at a time: one statement over every chunk would hold
# the search statistics' triggers for the whole table at once.
DROP_CHUNKS_BATCH = """
UPDATE chunks SET embedding = NULL
WHERE chunk_id IN (SELECT chunk_id FROM chunks WHERE embedding IS NOT NULL LIMIT $1)
  AND (SELECT chunks_model FROM embedding_stores) IS NULL
"""


@dataclass(frozen=True, slots=True)
class Missing:
    chunk_id: int
    tenant: str
    content: str


def _figures(value: object) -> Figures | None:
    if not value:
        return None
    modes = {
        mode: ModeFigures(ndcg_at_10=float(f["ndcg_at_10"]), recall_at_100=float(f["recall_at_100"]))
        for mode, f in dict(value).items()  # type: ignore[call-overload]
    }
    return Figures(modes=modes)


def figures_json(current: Figures | None, candidate: Figures | None) -> str | None:
    record = figures_record(current, candidate)
    return None if record is None else json.dumps(record)


def change_of(row: asyncpg.Record) -> ModelChange:
    figures = json.loads(row["figures"]) if row["figures"] else {}
    return ModelChange(
        change_id=row["change_id"],
        from_model=row["from_model"],
        from_store=row["from_store"],
        to_model=row["to_model"],
        to_store=row["to_store"],
        to_dimension=row["to_dimension"],
        state=ChangeState(row["state"]),
        chunks_done=row["chunks_done"],
        forced=row["forced"],
        gate_why=row["gate_why"],
        current_figures=_figures(figures.get("current")),
        candidate_figures=_figures(figures.get("candidate")),
        create_time=float(row["create_s"]),
        swap_time=None if row["swap_s"] is None else float(row["swap_s"]),
        end_time=None if row["end_s"] is None else float(row["end_s"]),
        tenant=row["tenant_id"],
    )


def stores_of(row: asyncpg.Record | None) -> Stores:
    assert row is not None  # the migration writes the one row
    return Stores(current=row["current_store"], chunks_model=row["chunks_model"], next_model=row["next_model"])


class PostgresModelChanges:
    def __init__(self, db: Database) -> None:
        self._db = db

    def transaction(self) -> AbstractAsyncContextManager[Transaction]:
        return self._db.transaction()

    async def stores(self) -> Stores:
        row = await self._db.fetchrow("embedding_stores", STORES)
        assert row is not None  # the migration writes the one row
        return stores_of(row)

    async def locked_stores(self, tx: Transaction) -> Stores:
        row = await tx.fetchrow("lock_embedding_stores", LOCK_STORES)
        assert row is not None
        return stores_of(row)

    @asynccontextmanager
    async def evaluation_claim(self, change_id: int) -> AsyncIterator[bool]:
        """True while this caller alone evaluates the change (until the block ends); False when
        another replica is evaluating it now."""
        async with self._db.transaction() as tx:
            yield bool(await tx.fetchval("claim_model_change_evaluation", CLAIM_EVALUATION, change_id))

    async def chunks_dimension(self) -> int:
        return int(await self._db.fetchval("chunks_dimension", CHUNKS_DIMENSION))

    async def latest(self) -> ModelChange | None:
        row = await self._db.fetchrow("latest_model_change", LATEST_CHANGE)
        return None if row is None else change_of(row)

    async def open_change(self, tx: Transaction | None = None) -> tuple[ModelChange, int] | None:
        """The open change and its cursor."""
        row = await (tx or self._db).fetchrow("open_model_change", OPEN_CHANGE)
        return None if row is None else (change_of(row), row["cursor_chunk_id"])

    async def insert(
        self,
        tx: Transaction,
        from_model: str,
        from_store: str,
        to_model: str,
        to_store: str,
        dimension: int,
        who: str,
        tenant: str,
    ) -> ModelChange:
        await tx.execute("ensure_tenant", ENSURE_TENANT, tenant)
        row = await tx.fetchrow(
            "insert_model_change", INSERT_CHANGE, from_model, from_store, to_model, to_store, dimension, who, tenant
        )
        assert row is not None
        return await self._announce(tx, change_of(row))

    async def set_state(
        self,
        tx: Transaction,
        change_id: int,
        state: ChangeState,
        *,
        forced: bool = False,
        why: str | None = None,
        figures: str | None = None,
    ) -> ModelChange:
        row = await tx.fetchrow("set_model_change_state", SET_STATE, change_id, state.value, forced, why, figures)
        assert row is not None
        return await self._announce(tx, change_of(row))

    async def _announce(self, tx: Transaction, change: ModelChange) -> ModelChange:
        """The change's event, in the transaction that moved it (a change from before events had
        a tenant sends none)."""
        if change.tenant is not None:
            ids = await publish(tx, change.tenant, [change_event(change)])
            await tx.execute("place_model_change_events", PLACE_EVENTS, ids)
        return change

    async def set_stores(self, tx: Transaction, stores: Stores, next_dimension: int | None = None) -> None:
        await tx.execute(
            "set_embedding_stores", SET_STORES, stores.current, stores.chunks_model, stores.next_model, next_dimension
        )

    async def prepare_next(self, tx: Transaction, dimension: int) -> None:
        await tx.execute("prepare_next_vectors", "SELECT prepare_next_vectors($1)", dimension)

    async def drop_next(self, tx: Transaction) -> None:
        await tx.execute("drop_next_vectors", "SELECT drop_next_vectors()")

    async def drop_chunks_batch(self, size: int) -> int:
        status = await self._db.execute("drop_chunks_vectors", DROP_CHUNKS_BATCH, size)
        return int(status.split()[-1])

    async def counts(self, store: str) -> tuple[int, int]:
        """(chunks with the store's vector, chunks in all)."""
        total = int(await self._db.fetchval("count_chunks", COUNT_CHUNKS))
        done_sql = COUNT_CHUNKS_VECTORS if store == CHUNKS_STORE else COUNT_NEXT
        return int(await self._db.fetchval("count_store", done_sql)), total

    async def missing(self, store: str, after: int, limit: int) -> list[Missing]:
        sql = MISSING_CHUNKS if store == CHUNKS_STORE else MISSING_NEXT
        rows = await self._db.fetch("missing_vectors", sql, after, limit)
        return [Missing(r["chunk_id"], r["tenant_id"], r["content"]) for r in rows]

    async def write(
        self,
        change_id: int,
        store: str,
        chunk_ids: Sequence[int],
        vectors: Sequence[Sequence[float]],
        cursor: int | None,
    ) -> int | None:
        """The vectors written where the chunk still lacks one, and the change advanced by them
        (its cursor to ``cursor`` when given), in one transaction: None when the change closed
        meanwhile (nothing written)."""
        values = [Vector(np.asarray(v, dtype=np.float32)) for v in vectors]
        try:
            async with self._db.transaction() as tx:
                stores = stores_of(await tx.fetchrow("share_embedding_stores", SHARE_STORES))
                if stores.model_of(store) is None:
                    return None
                sql = WRITE_CHUNKS if store == CHUNKS_STORE else WRITE_NEXT
                status = await tx.execute("write_vectors", sql, list(chunk_ids), values)
                written = int(status.split()[-1])
                advanced = await tx.fetchval("advance_model_change", ADVANCE, change_id, written, cursor or 0)
                if advanced is None:
                    raise _Closed()
        except _Closed:
            return None
        return written


class _Closed(Exception):
    """The change closed while its vectors were written: the transaction is rolled back."""


PUT_SET = """
WITH tenant AS (INSERT INTO tenants (tenant_id) VALUES ($1) ON CONFLICT (tenant_id) DO NOTHING)
INSERT INTO evaluation_sets (tenant_id, name, corpus_id, scope_claim, clearance, queries)
VALUES ($1, $2, $3, $4, $5, $6::jsonb)
ON CONFLICT (tenant_id, name) DO UPDATE SET corpus_id = excluded.corpus_id, scope_claim = excluded.scope_claim,
    clearance = excluded.clearance, queries = excluded.queries, update_time = now()
RETURNING extract(epoch FROM update_time) AS update_s
"""
DELETE_SET = "DELETE FROM evaluation_sets WHERE tenant_id = $1 AND name = $2"
ALL_SETS = """
SELECT tenant_id, name, corpus_id, scope_claim, clearance, queries, extract(epoch FROM update_time) AS update_s
FROM evaluation_sets ORDER BY tenant_id, name
"""


class PostgresEvaluationSets:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def put(self, put: EvaluationSet) -> EvaluationSet:
        queries = [{"query_id": q.query_id, "text": q.text, "relevant": dict(q.relevant)} for q in put.queries]
        update_s = await self._db.fetchval(
            "put_evaluation_set",
            PUT_SET,
            put.tenant,
            put.name,
            put.corpus_id,
            put.scope_claim,
            put.clearance.value,
            json.dumps(queries),
        )
        return replace(put, update_time=float(update_s))

    async def delete(self, tenant: str, name: str) -> bool:
        status = await self._db.execute("delete_evaluation_set", DELETE_SET, tenant, name)
        return status.split()[-1] != "0"

    async def all(self) -> list[EvaluationSet]:
        rows = await self._db.fetch("evaluation_sets", ALL_SETS)
        return [
            EvaluationSet(
                tenant=r["tenant_id"],
                name=r["name"],
                corpus_id=r["corpus_id"],
                scope_claim=r["scope_claim"],
                clearance=Band(r["clearance"]),
                queries=tuple(
                    JudgedQuery(q["query_id"], q["text"], {str(d): int(g) for d, g in q["relevant"].items()})
                    for q in json.loads(r["queries"])
                ),
                update_time=float(r["update_s"]),
            )
            for r in rows
        ]
