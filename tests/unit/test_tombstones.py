"""Tombstones' pure decisions (the recorded reason, the retry delay, who may list one), the
removal loop against a fake port, and the retention setting."""

from __future__ import annotations

import asyncio
import datetime

import pytest
from knowledge_ingest.config import IngestSettings
from knowledge_ingest.deletion.workers import RemovalWorkers, Remover
from knowledge_ingest.domain.tombstones import (
    DELETED_BY_REQUEST,
    MAX_REASON_CHARS,
    REMOVAL_RETRY_MAX_S,
    Removal,
    RemovalState,
    Tombstone,
    readable,
    reason_of,
    retry_delay_s,
)
from knowledge_runtime.errors import Unavailable
from knowledge_runtime.outages import outage
from knowledge_runtime.reach import Band, Reader, ScopePath
from knowledge_runtime.settings import Env
from structlog.testing import capture_logs

REQUIRED: dict[str, str] = {}


def tombstone(scope_path: str = "/", confidentiality: str = "TENANT") -> Tombstone:
    return Tombstone(
        tombstone_id=1,
        tenant="t",
        document_id=7,
        corpus_id=3,
        scope_path=scope_path,
        confidentiality=confidentiality,
        filename="a.txt",
        content_hash="",
        chunk_count=2,
        deleted_by="dev",
        reason=DELETED_BY_REQUEST,
        delete_time=datetime.datetime.now(datetime.UTC),
        removal_state=RemovalState.PENDING,
        remove_time=None,
    )


def test_the_reason_is_the_caller_s_trimmed_and_cut_else_the_default():
    assert reason_of("  replaced\n by   v2 ") == "replaced by v2"
    assert reason_of("") == reason_of(" \t") == DELETED_BY_REQUEST
    assert reason_of("", "deleted with its corpus") == "deleted with its corpus"
    assert len(reason_of("x" * 2000)) == MAX_REASON_CHARS


def test_a_failed_removal_backs_off_doubling_up_to_the_cap():
    assert [retry_delay_s(n) for n in (1, 2, 3)] == [2.0, 4.0, 8.0]
    assert retry_delay_s(0) == 2.0 and retry_delay_s(40) == REMOVAL_RETRY_MAX_S


def test_a_tombstone_is_readable_where_its_document_was():
    sales = Reader(ScopePath.parse("workspace:sales"))
    assert readable(sales, tombstone("/")) and readable(sales, tombstone("workspace:sales"))
    assert not readable(sales, tombstone("workspace:billing"))
    assert not readable(sales, tombstone("/", "CONFIDENTIAL"))
    assert readable(Reader(ScopePath.parse("/"), Band.CONFIDENTIAL), tombstone("/", "CONFIDENTIAL"))
    assert not readable(sales, tombstone("/", "NOT-A-BAND"))


class FakeTombstones:
    """The removal port: ``chunks`` left; ``lose_after`` batches before the lease is lost."""

    def __init__(self, chunks: int, lose_after: int | None = None, fail: bool = False) -> None:
        self.chunks = chunks
        self.lose_after = lose_after
        self.fail = fail
        self.batches = 0
        self.finished = False
        self.failures: list[tuple[float, str]] = []

    async def remove_batch(self, removal: Removal, batch: int, lease_s: float) -> int | None:
        if self.fail:
            raise ConnectionError("the database went away")
        if self.lose_after is not None and self.batches >= self.lose_after:
            return None
        self.batches += 1
        taken = min(batch, self.chunks)
        self.chunks -= taken
        return taken

    async def finish(self, removal: Removal, lease_s: float) -> bool:
        self.finished = True
        return True

    async def failed(self, removal: Removal, retry_after_s: float, error: str) -> None:
        self.failures.append((retry_after_s, error))


REMOVAL = Removal(tombstone_id=1, tenant="t", document_id=7, corpus_id=3, owner="w", attempts=2)


async def test_a_removal_deletes_a_batch_at_a_time_then_finishes():
    port = FakeTombstones(chunks=5)
    assert await Remover(port, lease_s=5.0, batch=2).run(REMOVAL)
    assert port.chunks == 0 and port.batches == 3 and port.finished


async def test_a_removal_whose_lease_is_lost_stops_without_finishing():
    port = FakeTombstones(chunks=5, lose_after=1)
    assert not await Remover(port, lease_s=5.0, batch=2).run(REMOVAL)
    assert port.chunks == 3 and not port.finished and not port.failures


async def test_a_failed_removal_is_recorded_for_a_retry_with_backoff():
    port = FakeTombstones(chunks=5, fail=True)
    assert not await Remover(port, lease_s=5.0, batch=2).run(REMOVAL)
    assert port.failures == [(retry_delay_s(2), "ConnectionError")] and not port.finished


class AwayDatabase:
    """The removal port while the database is away, then back (no removal to claim)."""

    def __init__(self) -> None:
        self.away = True
        self.claims = 0

    async def claim(self, owner: str, lease_s: float) -> Removal | None:
        self.claims += 1
        if self.away:
            raise Unavailable("the database is unavailable")
        return None

    async def prune(self, retention_s: float) -> int:
        return 0


async def test_an_outage_is_logged_once_by_the_removal_loops_not_once_per_poll():
    outage("database").succeeded()  # the process's one record: up, whatever a test before left
    port = AwayDatabase()
    workers = RemovalWorkers(port, count=2, lease_s=1.0, retention_s=60.0, poll_s=0.01)  # type: ignore[arg-type]
    with capture_logs() as logs:
        await workers.start()
        try:
            while port.claims < 10:
                await asyncio.sleep(0.01)
            port.away = False
            claimed = port.claims
            while port.claims < claimed + 4:
                await asyncio.sleep(0.01)
        finally:
            await workers.stop()
    events = [e["event"] for e in logs if e["event"] != "tombstones_pruned"]
    assert events == ["dependency_unavailable", "dependency_available"], events


def test_the_tombstone_retention_is_a_setting():
    assert IngestSettings.from_env(Env(REQUIRED)).tombstone_retention_days == 90.0
    assert (
        IngestSettings.from_env(Env({**REQUIRED, "KNOWLEDGE_TOMBSTONE_RETENTION_DAYS": "7"})).tombstone_retention_days
        == 7.0
    )
    with pytest.raises(Exception, match="TOMBSTONE_RETENTION_DAYS"):
        IngestSettings.from_env(Env({**REQUIRED, "KNOWLEDGE_TOMBSTONE_RETENTION_DAYS": "-1"}))
