"""Events: the pure rules (which change is which event, where a watch starts) and the watch loop
with fakes at its ports (the real outbox is in tests/integration/test_events.py)."""

import asyncio
import datetime
from contextlib import contextmanager

import pytest
from knowledge_ingest.domain.documents import State
from knowledge_ingest.domain.errors import CursorExpired, InvalidRequest
from knowledge_ingest.domain.events import (
    Event,
    EventPlacement,
    EventType,
    delivered_to,
    document_ended,
    moved,
    parse_cursor,
    searchable,
    start_after,
)
from knowledge_ingest.domain.system_corpora import CorpusKind
from knowledge_ingest.events.usecases import EventUseCases
from knowledge_runtime.auth import Scope
from knowledge_runtime.reach import Band, Reader, ScopePath
from knowledge_runtime.refusals import Refusal, Refused
from knowledge_runtime.system_corpora import SYSTEM_WRITE

from tests.support.reach import FakeReach

NOW = datetime.datetime(2026, 12, 1, tzinfo=datetime.UTC)


def test_only_failed_and_cancelled_end_a_document_with_an_event():
    failed = document_ended(State.FAILED, 7, 2, "the PDF is damaged")
    assert failed is not None and failed.type is EventType.DOCUMENT_FAILED and failed.detail["reason"]
    cancelled = document_ended(State.CANCELLED, 7, 2, None)
    assert cancelled is not None and cancelled.type is EventType.DOCUMENT_CANCELLED
    for state in (State.QUEUED, State.EXTRACTING, State.EMBEDDING, State.SEARCHABLE):
        assert document_ended(state, 7, 2, None) is None
    assert searchable(7, 2, 12, ("1 page(s) could not be read",)).detail == {
        "chunk_count": 12,
        "warnings": ["1 page(s) could not be read"],
    }


def test_a_move_within_the_same_corpus_is_no_event():
    assert moved(7, 3, 3) is None
    event = moved(7, 2, 3)
    assert event is not None and event.corpus_id == 3 and event.detail == {"from_corpus_id": 2}


@pytest.mark.parametrize("bad", ["abc", "-1", "+1", "007", " 1", "1.0", "١", "9" * 21])
def test_a_cursor_not_issued_is_invalid(bad):
    with pytest.raises(InvalidRequest):
        parse_cursor(bad)


def test_where_a_watch_starts():
    assert parse_cursor("") is None and parse_cursor("0") == 0 and parse_cursor("42") == 42
    assert start_after(None, first_retained=5, head=9) == 4  # empty: the oldest retained
    assert start_after(None, first_retained=1, head=0) == 0  # nothing yet
    assert start_after(4, first_retained=5, head=9) == 4  # the next one is still kept
    assert start_after(9, first_retained=5, head=9) == 9
    with pytest.raises(CursorExpired) as expired:
        start_after(3, first_retained=5, head=9)  # event 4 is gone
    assert expired.value.code == "OUT_OF_RANGE" and expired.value.metadata["first_retained_cursor"] == "5"
    with pytest.raises(InvalidRequest):
        start_after(10, first_retained=5, head=9)


def test_a_cursor_ahead_of_the_newest_names_no_tenant_wide_cursor():
    """The newest cursor counts events of corpora the caller may not read: never told."""
    with pytest.raises(InvalidRequest) as ahead:
        start_after(5_000_000, first_retained=1, head=1_234_567)
    told = ahead.value.message + " ".join(ahead.value.metadata.values())
    assert "1234567" not in told and "1_234_567" not in told
    assert ahead.value.metadata["field"] == "after"


class FakeLog:
    def __init__(self, events: list[Event], first: int = 1) -> None:
        self.events = events
        self.first = first

    async def read_after(self, tenant, after, limit):
        return [e for e in self.events if e.seq > after][:limit]

    async def bounds(self, tenant):
        head = self.events[-1].seq if self.events else self.first - 1
        return (self.events[0].seq if self.events else head + 1), head

    async def prune(self, retention_s):
        return 0


class FakeWakeups:
    class _Wakeup:
        def clear(self):
            pass

        async def wait(self, timeout_s):
            await asyncio.sleep(0)
            return False  # nothing new: the heartbeat is due

    @contextmanager
    def subscribe(self, tenant):
        yield self._Wakeup()


def placed(node: str = "/", band: Band = Band.TENANT, kind: CorpusKind = CorpusKind.USER) -> EventPlacement:
    return EventPlacement(ScopePath.parse(node), band, kind)


ROOT_TENANT = placed()


def event(seq: int, placement: EventPlacement | None = ROOT_TENANT) -> Event:
    return Event(seq, None, EventType.CORPUS_CREATED, None, seq, NOW, {}, placement)


def reach_with(*nodes: str) -> FakeReach:
    reach = FakeReach()
    for i, node in enumerate(nodes):
        reach.place("t", 1000 + i, node)
    return reach


def use_cases(log: FakeLog, reach: FakeReach | None = None) -> EventUseCases:
    return EventUseCases(log, FakeWakeups(), heartbeat_s=0.01, retention_s=60, reach=reach or FakeReach())


ROOT_READER = Scope("t", frozenset(), scope_claim="/")


@pytest.mark.parametrize(
    ("placement", "sent"),
    [
        (placed("/"), True),  # an ancestor's corpus
        (placed("/", Band.GENERAL), True),
        (placed("workspace:eng"), True),  # its own node
        (placed("/", Band.CONFIDENTIAL), False),  # above its clearance
        (placed("workspace:sales"), False),  # a sibling's
        (placed("workspace:eng/project:billing"), False),  # a descendant's
        (placed("/", kind=CorpusKind.HOUSEKEEPING), False),  # only its writers read a housekeeping corpus
        (None, False),  # no corpus to judge by: closed
    ],
)
def test_an_event_is_sent_only_to_a_consumer_that_could_read_its_corpus(placement, sent):
    reader = Reader(ScopePath.parse("workspace:eng"), Band.TENANT)
    assert delivered_to(event(1, placement), reader, frozenset()) is sent


def test_a_housekeeping_corpus_event_reaches_its_writers():
    housekeeping = event(1, placed("/", kind=CorpusKind.HOUSEKEEPING))
    assert delivered_to(housekeeping, Reader(ScopePath()), frozenset({SYSTEM_WRITE}))


async def test_skipped_events_move_the_cursor_on_and_a_heartbeat_says_so_at_once():
    sales, eng = placed("workspace:sales"), placed("workspace:eng")
    log = FakeLog([event(1, eng), event(2, sales), event(3, eng), event(4, sales), event(5, sales)])
    stream = use_cases(log, reach_with("workspace:eng", "workspace:sales")).watch(
        Scope("t", frozenset(), scope_claim="workspace:eng"), ""
    )
    got = [await anext(stream) for _ in range(3)]
    assert [(e.type, e.cursor) for e in got] == [
        (EventType.CORPUS_CREATED, "1"),
        (EventType.CORPUS_CREATED, "3"),
        (EventType.HEARTBEAT, "5"),  # 4 and 5 were not for it: a resume starts after them
    ]


async def test_a_watch_with_an_unresolved_scope_is_refused():
    for scope in (Scope("t", frozenset()), Scope("t", frozenset(), scope_claim="workspace:nowhere")):
        with pytest.raises(Refused) as refused:
            await anext(use_cases(FakeLog([event(1)])).watch(scope, ""))
        assert refused.value.refusal is Refusal.SCOPE_UNRESOLVED


async def test_the_watch_delivers_in_order_then_heartbeats_at_its_cursor():
    events = use_cases(FakeLog([event(1), event(2), event(3)]))
    got = []
    async for item in events.watch(ROOT_READER, "1"):
        got.append((item.type, item.cursor))
        if len(got) == 4:
            break
    assert got == [
        (EventType.CORPUS_CREATED, "2"),
        (EventType.CORPUS_CREATED, "3"),
        (EventType.HEARTBEAT, "3"),
        (EventType.HEARTBEAT, "3"),
    ]


async def test_a_consumer_overtaken_by_retention_mid_stream_is_told_not_skipped():
    log = FakeLog([event(1), event(2)])
    stream = use_cases(log).watch(ROOT_READER, "")
    assert (await anext(stream)).seq == 1
    log.events = [event(5)]  # 3 and 4 were pruned while the consumer was still at 1
    assert (await anext(stream)).seq == 2  # read in the first batch
    assert (await anext(stream)).type is EventType.HEARTBEAT  # the next read finds 5 after 2: a gap
    with pytest.raises(CursorExpired):
        await anext(stream)
