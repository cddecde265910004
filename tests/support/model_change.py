"""What the model change's integration tests share: waiting for a change's state, and putting
the deployment's embedding stores back as they were (every test shares one database)."""

from __future__ import annotations

import asyncio
import time

from knowledge.v1 import ingest_pb2
from knowledge_runtime.db.pool import Database

STATE = ingest_pb2.ModelChangeState


async def wait_state(stub, metadata, wanted: int, timeout: float = 180.0) -> ingest_pb2.ModelChange:
    deadline = time.monotonic() + timeout
    while True:
        change = await stub.GetModelChange(ingest_pb2.GetModelChangeRequest(), metadata=metadata)
        if change.state == wanted:
            return change
        assert time.monotonic() < deadline, (
            f"still {STATE.Name(change.state)}: {change.chunks_done}/{change.chunks_total} {change.gate_reason}"
        )
        await asyncio.sleep(0.2)


async def reset_stores(db: Database, tenant: str) -> None:
    """Every open change cancelled, search reading the chunks' own vectors, the next store
    dropped, and ``tenant``'s evaluation sets deleted."""
    await db.execute("reset", "DELETE FROM evaluation_sets WHERE tenant_id = $1", tenant)
    await db.execute(
        "reset",
        "UPDATE model_changes SET state = 'cancelled', end_time = now() "
        "WHERE state IN ('re_embedding', 'evaluating', 'held', 'swapped')",
    )
    await db.execute(
        "reset", "UPDATE embedding_stores SET current_store = 'chunks', chunks_model = '', next_model = NULL"
    )
    await db.execute("reset", "SELECT drop_next_vectors()")
