"""A deletion that crosses a worker's write on the same document and job (PostgreSQL ends one of
the two with a deadlock error, its whole transaction rolled back) runs again, and a deletion that
keeps meeting one gives up with the error rather than spinning."""

from __future__ import annotations

from contextlib import asynccontextmanager

import asyncpg
import pytest
from knowledge_ingest.deletion.postgres import PostgresTombstones


class Tx:
    def __init__(self, db: Db) -> None:
        self.db = db

    async def fetch(self, name: str, _sql: str, *_args: object) -> list[dict]:
        if name == "lock_live_documents":
            self.db.attempts += 1
            if self.db.attempts <= self.db.deadlocks:
                raise asyncpg.DeadlockDetectedError("deadlock detected")
            return []  # no live document: the deletion ends with None
        raise AssertionError(name)


class Db:
    def __init__(self, deadlocks: int) -> None:
        self.deadlocks, self.attempts = deadlocks, 0

    @asynccontextmanager
    async def transaction(self):
        yield Tx(self)


async def test_a_deletion_that_meets_a_deadlock_runs_again():
    db = Db(deadlocks=2)
    assert await PostgresTombstones(db).delete_document("t", 7, "u", "r") is None  # type: ignore[arg-type]
    assert db.attempts == 3


async def test_a_deletion_that_keeps_meeting_deadlocks_raises_the_error():
    db = Db(deadlocks=5)
    with pytest.raises(asyncpg.DeadlockDetectedError):
        await PostgresTombstones(db).delete_document("t", 7, "u", "r")  # type: ignore[arg-type]
    assert db.attempts == 3
