"""The embedder's circuit breaker: one outage costs one deadline per cool-off, not every
request; a half-open probe closes it again. A fake clock drives it."""

import asyncio

import pytest
from knowledge_runtime.breaker import DEFAULT_SLOW_S, BreakerState, CircuitBreaker, slow_within
from knowledge_runtime.costs import Cost
from knowledge_search.adapters.embedder import BreakingEmbedder, breaking
from knowledge_search.domain.errors import EmbedderUnavailable, RerankUnavailable
from knowledge_search.domain.model import EmbeddedQuery


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_failure_opens_it_for_the_cool_off_then_one_probe_goes_through():
    clock = Clock()
    breaker = CircuitBreaker(clock, cool_off_s=5.0)
    assert breaker.allow() and breaker.state is BreakerState.CLOSED
    breaker.failed()
    clock.now += 4.9
    assert not breaker.allow()  # within the cool-off: refused at once
    clock.now += 0.1
    assert breaker.allow() and breaker.state is BreakerState.HALF_OPEN  # the probe
    assert not breaker.allow()  # one probe at a time
    breaker.failed()  # the probe failed: another whole cool-off
    clock.now += 4.0
    assert not breaker.allow()
    clock.now += 1.0
    assert breaker.allow()
    breaker.succeeded()
    assert breaker.state is BreakerState.CLOSED and breaker.allow() and breaker.allow()


def test_a_call_abandoned_after_a_silence_counts_as_a_failure_a_quick_one_does_not():
    clock = Clock()
    breaker = CircuitBreaker(clock, cool_off_s=5.0, slow_s=0.2)
    started = clock.now
    clock.now += 0.05
    breaker.abandoned(started)  # the caller went away quickly: says nothing about the embedder
    assert breaker.state is BreakerState.CLOSED
    clock.now += 0.2
    breaker.abandoned(started)  # silent for 0.25 s until its deadline: the embedder is out
    assert breaker.state is BreakerState.OPEN and not breaker.allow()
    clock.now += 5.0
    assert breaker.allow()  # the probe, abandoned quickly: the next call probes again
    breaker.abandoned(clock.now)
    assert breaker.allow() and breaker.state is BreakerState.HALF_OPEN


class Embedder:
    """The inner client: answers, fails as unreachable, or hangs like a SIGSTOPped process."""

    def __init__(self) -> None:
        self.mode = "up"
        self.calls = 0

    async def embed_query(self, tenant, text):
        self.calls += 1
        if self.mode == "down":
            raise EmbedderUnavailable()
        if self.mode == "hung":
            await asyncio.sleep(3600)
        if self.mode == "cold":
            await self.release.wait()
        if self.mode == "no-reranker":
            raise RerankUnavailable()
        return EmbeddedQuery(vector=[1.0], warnings=(), cost=Cost())

    async def rerank(self, tenant, query, passages):
        return await self.embed_query(tenant, query)

    async def close(self):
        pass


async def test_the_embedder_behind_the_breaker_fails_fast_while_it_is_out():
    clock, inner = Clock(), Embedder()
    embedder = BreakingEmbedder(inner, CircuitBreaker(clock, cool_off_s=5.0, slow_s=0.2))
    assert (await embedder.embed_query("acme", "q")).vector == [1.0]
    inner.mode = "hung"
    call = asyncio.ensure_future(embedder.embed_query("acme", "q"))
    await asyncio.sleep(0)
    clock.now += 0.3  # the caller's deadline passes after 0.3 s of silence
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    for _ in range(50):  # within the cool-off: at once, without calling the embedder
        with pytest.raises(EmbedderUnavailable):
            await asyncio.wait_for(embedder.embed_query("acme", "q"), timeout=0.05)
        with pytest.raises(EmbedderUnavailable):
            await embedder.rerank("acme", "q", ["p"])
    assert inner.calls == 2
    inner.mode = "up"
    clock.now += 5.0  # the probe goes through and closes it
    assert (await embedder.embed_query("acme", "q")).vector == [1.0]
    assert (await embedder.embed_query("acme", "q")).vector == [1.0] and inner.calls == 4
    await embedder.close()  # the silent call left to finish is given up


async def test_a_cold_embedder_that_answers_late_closes_the_breaker_at_once():
    """The call its caller gave up on is left to finish: its late answer closes the breaker, so a
    slow first embedding does not leave a whole cool-off of keyword-only answers."""
    clock, inner = Clock(), Embedder()
    embedder = BreakingEmbedder(inner, CircuitBreaker(clock, cool_off_s=5.0, slow_s=0.2))
    inner.mode = "cold"
    release = inner.release = asyncio.Event()
    call = asyncio.ensure_future(embedder.embed_query("acme", "q"))
    await asyncio.sleep(0)
    clock.now += 0.3
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    with pytest.raises(EmbedderUnavailable):  # open meanwhile
        await embedder.embed_query("acme", "q")
    release.set()  # the embedder answers the abandoned call
    for _ in range(10):
        await asyncio.sleep(0)
    inner.mode = "up"
    assert (await embedder.embed_query("acme", "q")).vector == [1.0]  # closed again, within the cool-off
    await embedder.close()


async def test_an_unreachable_embedder_opens_it_and_an_answered_refusal_does_not():
    clock, inner = Clock(), Embedder()
    embedder = BreakingEmbedder(inner, CircuitBreaker(clock, cool_off_s=5.0))
    inner.mode = "no-reranker"  # the embedder answered: it is up
    for _ in range(3):
        with pytest.raises(RerankUnavailable):
            await embedder.rerank("acme", "q", ["p"])
    assert inner.calls == 3
    inner.mode = "down"
    with pytest.raises(EmbedderUnavailable):
        await embedder.embed_query("acme", "q")
    with pytest.raises(EmbedderUnavailable):
        await embedder.embed_query("acme", "q")
    assert inner.calls == 4  # the second never reached it


def test_the_silence_that_opens_it_stays_below_a_short_pre_fetch_deadline():
    assert slow_within(1.0) == DEFAULT_SLOW_S and slow_within(0.3) == pytest.approx(0.2)  # the default: 300 ms
    assert slow_within(0.1) < 0.1 and slow_within(0.001) < 0.001


async def test_a_call_given_up_on_at_a_100_ms_deadline_opens_the_breaker():
    """KNOWLEDGE_PREFETCH_DEADLINE_MS=100: each pre-fetch gives up at 100 ms, so a fixed 200 ms
    silence would never open the breaker and every request would wait its whole deadline."""
    inner = Embedder()
    embedder = breaking(inner, 5.0, slow_s=slow_within(0.1))  # type: ignore[arg-type]
    inner.mode = "hung"
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.1):
            await embedder.embed_query("acme", "q")
    with pytest.raises(EmbedderUnavailable):  # open: refused at once, the embedder not asked
        await asyncio.wait_for(embedder.embed_query("acme", "q"), timeout=0.05)
    assert inner.calls == 1
    await embedder.close()


async def test_a_call_ended_by_its_caller_s_deadline_is_no_outage_by_itself(monkeypatch):
    """The embedder's call carries its caller's deadline (runtime ``calls``): one that runs out of
    it fails as unreachable, which is its caller giving up, as a cancel is, not the embedder down:
    it opens the breaker only after a silence, as a cancel does."""
    from knowledge_search.adapters import embedder as adapter

    monkeypatch.setattr(adapter, "caller_out_of_time", lambda: True)
    clock = Clock()

    class TimedOut(Embedder):
        silence_s = 0.0

        async def embed_query(self, tenant, text):
            self.calls += 1
            clock.now += self.silence_s
            raise EmbedderUnavailable()  # what the channel's DEADLINE_EXCEEDED becomes

    inner = TimedOut()
    embedder = BreakingEmbedder(inner, CircuitBreaker(clock, cool_off_s=5.0, slow_s=0.2))
    inner.silence_s = 0.03  # a 30 ms deadline
    for _ in range(3):
        with pytest.raises(EmbedderUnavailable):
            await embedder.embed_query("acme", "q")
    assert inner.calls == 3  # nothing opened: every caller still reaches the embedder
    inner.silence_s = 0.3  # silent for longer than slow_s until the deadline
    with pytest.raises(EmbedderUnavailable):
        await embedder.embed_query("acme", "q")
    with pytest.raises(EmbedderUnavailable):  # open: refused at once
        await embedder.embed_query("acme", "q")
    assert inner.calls == 4
    await embedder.close()
