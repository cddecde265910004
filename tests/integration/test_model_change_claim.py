"""Every ingest replica tends the open model change, but only one runs its evaluation sets at a
time (a transaction-level advisory lock on real PostgreSQL): the sets run through search, and
each replica running them would multiply that load by the replica count."""

from __future__ import annotations

import asyncio

import pytest
from knowledge_ingest.domain.model_change import ChangeState, ModelChange
from knowledge_ingest.models.postgres import PostgresModelChanges
from knowledge_ingest.models.usecases import ModelChangeUseCases
from knowledge_runtime.db.pool import Database

pytestmark = pytest.mark.integration


class SlowSets:
    """An evaluator whose sets take a while; it counts its runs and stores no figures."""

    def __init__(self) -> None:
        self.runs = 0

    async def run(self) -> None:
        self.runs += 1
        await asyncio.sleep(0.5)


def evaluating(change_id: int) -> ModelChange:
    return ModelChange(
        change_id, "a", "chunks", "b", "next", 384, ChangeState.EVALUATING, 0, False, "", None, None, 0.0, None, None
    )


async def test_two_replicas_evaluate_a_change_once_at_a_time_and_a_dead_claim_is_released(migrated_pg):
    url = migrated_pg.url(user="knowledge_ingest")
    first, second = await Database.connect(url, max_size=2), await Database.connect(url, max_size=2)
    sets = SlowSets()
    replicas = [
        ModelChangeUseCases(PostgresModelChanges(db), embedder=None, grace_s=0, evaluator=sets)  # type: ignore[arg-type]
        for db in (first, second)
    ]
    try:
        await asyncio.gather(*(replica._complete(evaluating(987_654)) for replica in replicas))
        assert sets.runs == 1  # the second replica found the claim held and skipped
        await replicas[1]._complete(evaluating(987_654))
        assert sets.runs == 2  # released when the first one's run ended
        await asyncio.gather(*(replica._complete(evaluating(n)) for replica, n in zip(replicas, (1, 2))))
        assert sets.runs == 4  # another change's claim is its own

        # A replica that dies mid-run (its connection gone) lets the claim go.
        store = PostgresModelChanges(first)
        with pytest.raises(RuntimeError):
            async with store.evaluation_claim(987_654) as claimed:
                assert claimed
                async with PostgresModelChanges(second).evaluation_claim(987_654) as other:
                    assert not other
                raise RuntimeError("the replica went down")
        async with PostgresModelChanges(second).evaluation_claim(987_654) as other:
            assert other
    finally:
        await first.close()
        await second.close()
