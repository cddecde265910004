"""The batch queue and its runner, with a fake encoder at the runner's port: budgets, ordering,
overload, cancellation, lanes."""

import asyncio
import threading

import numpy as np
import pytest
from knowledge_embedder import metrics
from knowledge_embedder.batching.queue import BatchQueue
from knowledge_embedder.batching.runner import BatchRunner
from knowledge_embedder.domain.errors import EmbedderStopping, QueueFull
from prometheus_client import REGISTRY


class FakeEncoder:
    """Vectors that encode the text's length; records every batch; can hold a batch back."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.hold = threading.Event()
        self.hold.set()
        self.entered = threading.Event()
        self.fail_next = False

    def encode(self, texts: list[str], *, query: bool = False) -> np.ndarray:
        self.entered.set()
        self.hold.wait(timeout=10)
        self.batches.append(list(texts))
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("model exploded")
        return np.array([[float(len(t)), 1.0] for t in texts], dtype=np.float32)


@pytest.fixture
async def fake():
    return FakeEncoder()


async def make_runner(encoder: FakeEncoder, *, max_batch_tokens: int = 100, max_queue: int = 1000) -> BatchRunner:
    runner = BatchRunner(BatchQueue(max_batch_tokens=max_batch_tokens, max_queue=max_queue), encoder)
    runner.start()
    return runner


async def hold_first_batch(runner: BatchRunner, encoder: FakeEncoder) -> asyncio.Task:
    """A first caller whose forward pass blocks, so that later callers pile up behind it."""
    encoder.hold.clear()
    encoder.entered.clear()
    first = asyncio.create_task(runner.embed(["first"], [1]))
    await asyncio.to_thread(encoder.entered.wait, 5)
    return first


async def test_each_caller_gets_its_own_vectors_in_order(fake):
    runner = await make_runner(fake)
    try:
        vectors = await runner.embed(["a", "bbb", "cc"], [1, 3, 2])
        assert vectors[:, 0].tolist() == [1.0, 3.0, 2.0]
    finally:
        await runner.stop()


async def test_concurrent_callers_share_batches_cut_by_the_token_budget_and_sorted_by_length(fake):
    runner = await make_runner(fake, max_batch_tokens=10)
    try:
        first = await hold_first_batch(runner, fake)
        texts = ["x" * n for n in (3, 1, 4, 2, 5, 6)]  # tokens = length; 3+1+4+2 = 10 fits, +5 does not
        callers = [asyncio.create_task(runner.embed([t], [len(t)])) for t in texts]
        await asyncio.sleep(0.05)
        assert runner.queue.depth == 6
        fake.hold.set()
        results = await asyncio.gather(first, *callers)
        assert [float(r[0, 0]) for r in results[1:]] == [3.0, 1.0, 4.0, 2.0, 5.0, 6.0]
        # Arrival order decides who is in a batch; length decides the order inside it.
        assert fake.batches[1:] == [["xxxx", "xxx", "xx", "x"], ["xxxxx"], ["xxxxxx"]]
        assert runner.queue.depth == 0
    finally:
        await runner.stop()


async def test_an_input_over_the_budget_still_runs_alone(fake):
    runner = await make_runner(fake, max_batch_tokens=64)
    try:
        vectors = await runner.embed(["long"], [500])
        assert vectors.shape == (1, 2) and fake.batches == [["long"]]
    finally:
        await runner.stop()


async def test_past_the_queue_limit_a_caller_is_refused_at_once(fake):
    runner = await make_runner(fake, max_queue=4)
    try:
        first = await hold_first_batch(runner, fake)
        waiting = asyncio.create_task(runner.embed(["a", "b", "c"], [1, 1, 1]))
        await asyncio.sleep(0.05)
        rejected_before = REGISTRY.get_sample_value("knowledge_embedder_rejected_inputs_total") or 0
        with pytest.raises(QueueFull) as caught:
            await asyncio.wait_for(runner.embed(["d", "e"], [1, 1]), timeout=1)
        assert caught.value.code == "RESOURCE_EXHAUSTED" and caught.value.metadata["limit"] == "4"
        assert REGISTRY.get_sample_value("knowledge_embedder_rejected_inputs_total") == rejected_before + 2
        fake.hold.set()
        await asyncio.gather(first, waiting)
        # Once the queue drained, the same request fits again.
        assert (await runner.embed(["d", "e"], [1, 1])).shape == (2, 2)
    finally:
        await runner.stop()


async def test_a_cancelled_caller_costs_no_forward_pass(fake):
    runner = await make_runner(fake)
    try:
        first = await hold_first_batch(runner, fake)
        gone = asyncio.create_task(runner.embed(["cancelled-1", "cancelled-2"], [1, 1]))
        stays = asyncio.create_task(runner.embed(["stays"], [1]))
        await asyncio.sleep(0.05)
        assert runner.queue.depth == 3
        gone.cancel()
        await asyncio.sleep(0)
        assert runner.queue.depth == 1  # the autoscaler's signal drops at once
        fake.hold.set()
        await asyncio.gather(first, stays)
        seen = [text for batch in fake.batches for text in batch]
        assert "stays" in seen and not any(t.startswith("cancelled") for t in seen)
        assert gone.cancelled()
    finally:
        await runner.stop()


async def test_a_failed_batch_fails_its_callers_and_the_lane_goes_on(fake):
    runner = await make_runner(fake)
    try:
        fake.fail_next = True
        with pytest.raises(RuntimeError):
            await runner.embed(["a"], [1])
        assert (await runner.embed(["b"], [1]))[0, 0] == 1.0
    finally:
        await runner.stop()


async def test_metrics_follow_the_batches(fake):
    runner = await make_runner(fake)
    try:
        tokens = REGISTRY.get_sample_value("knowledge_embedder_tokens_total") or 0
        batches = REGISTRY.get_sample_value("knowledge_embedder_batch_size_count") or 0
        await runner.embed(["a", "b"], [7, 5])
        assert REGISTRY.get_sample_value("knowledge_embedder_tokens_total") == tokens + 12
        assert REGISTRY.get_sample_value("knowledge_embedder_batch_size_count") == batches + 1
        assert REGISTRY.get_sample_value("knowledge_embedder_stage_seconds_count", {"stage": "inference"}) >= 1
        assert REGISTRY.get_sample_value("knowledge_embedder_queue_depth") == 0
        assert metrics.QUEUE_DEPTH._value.get() == 0
    finally:
        await runner.stop()


async def test_stopping_fails_waiting_callers_as_unavailable(fake):
    runner = await make_runner(fake)
    first = await hold_first_batch(runner, fake)
    waiting = asyncio.create_task(runner.embed(["w"], [1]))
    await asyncio.sleep(0.05)
    fake.hold.set()
    await runner.stop()
    for task in (first, waiting):
        with pytest.raises(EmbedderStopping):
            await task
    with pytest.raises(EmbedderStopping):
        await runner.embed(["late"], [1])


# -- the interactive priority ------------------------------------------------------------------


async def test_a_query_goes_before_every_waiting_passage(fake):
    runner = BatchRunner(BatchQueue(max_batch_tokens=100, max_queue=1000, bulk_batch_tokens=10), fake)
    runner.start()
    try:
        first = await hold_first_batch(runner, fake)
        bulk = [asyncio.create_task(runner.embed([f"passage{i}"], [5])) for i in range(20)]  # ten batches' worth
        await asyncio.sleep(0)
        query = asyncio.create_task(runner.embed(["query"], [2], interactive=True))
        await asyncio.sleep(0)
        fake.hold.set()
        await asyncio.gather(first, query, *bulk)
        assert fake.batches[1] == ["query"]  # the very next batch, ahead of 20 passages queued before it
        assert all(len(batch) <= 2 for batch in fake.batches[2:])  # bulk batches capped at 10 tokens
    finally:
        await runner.stop()


async def test_passages_still_progress_under_a_flood_of_queries(fake):
    runner = BatchRunner(BatchQueue(max_batch_tokens=5, max_queue=1000, bulk_batch_tokens=5, interactive_burst=3), fake)
    runner.start()
    try:
        first = await hold_first_batch(runner, fake)
        passages = [asyncio.create_task(runner.embed([f"p{i}"], [5])) for i in range(2)]
        queries = [asyncio.create_task(runner.embed([f"q{i}"], [5], interactive=True)) for i in range(12)]
        await asyncio.sleep(0)
        fake.hold.set()
        await asyncio.gather(first, *passages, *queries)
        order = [batch[0][0] for batch in fake.batches[1:]]
        # Three query batches, then a passage, three more, the other passage, then the rest.
        assert order == ["q", "q", "q", "p", "q", "q", "q", "p", "q", "q", "q", "q", "q", "q"]
    finally:
        await runner.stop()


async def test_a_full_bulk_backlog_never_refuses_a_query(fake):
    runner = BatchRunner(BatchQueue(max_batch_tokens=100, max_queue=4), fake)
    runner.start()
    try:
        first = await hold_first_batch(runner, fake)
        bulk = asyncio.create_task(runner.embed(["a", "b", "c", "d"], [1, 1, 1, 1]))
        await asyncio.sleep(0)
        with pytest.raises(QueueFull):
            await runner.embed(["e"], [1])  # the bulk priority is full
        query = asyncio.create_task(runner.embed(["query"], [1], interactive=True))
        await asyncio.sleep(0)
        assert runner.queue.depth == 5
        fake.hold.set()
        vectors = await query
        assert vectors.shape == (1, 2)
        await asyncio.gather(first, bulk)
        assert runner.queue.depth == 0
    finally:
        await runner.stop()


async def test_a_cancelled_query_is_skipped_and_uncounted(fake):
    runner = BatchRunner(BatchQueue(max_batch_tokens=100, max_queue=1000), fake)
    runner.start()
    try:
        first = await hold_first_batch(runner, fake)
        query = asyncio.create_task(runner.embed(["gone"], [1], interactive=True))
        passage = asyncio.create_task(runner.embed(["kept"], [1]))
        await asyncio.sleep(0)
        query.cancel()
        await asyncio.sleep(0)
        fake.hold.set()
        await asyncio.gather(first, passage)
        assert ["gone"] not in fake.batches and runner.queue.depth == 0
    finally:
        await runner.stop()


def test_passages_go_in_small_batches_on_a_cpu_and_large_ones_on_a_gpu():
    from knowledge_embedder.config import EmbedderSettings
    from knowledge_runtime.settings import Env

    def settings(**values: str) -> EmbedderSettings:
        return EmbedderSettings.from_env(
            Env({"KNOWLEDGE_EMBEDDING_MODEL": "/models/m", **{f"KNOWLEDGE_{k}": v for k, v in values.items()}})
        )

    assert settings().bulk_batch_tokens_on("cpu") == 512
    assert settings().bulk_batch_tokens_on("cuda:0") == 16384
    assert settings(BULK_BATCH_TOKENS="2048").bulk_batch_tokens_on("cuda") == 2048
    assert settings(BULK_BATCH_TOKENS="99999").bulk_batch_tokens_on("cpu") == 16384  # never above the budget
    assert settings().interactive_burst == 1


async def test_passages_are_packed_around_the_oldest_by_length_so_batches_pad_little(fake):
    runner = BatchRunner(BatchQueue(max_batch_tokens=600, max_queue=1000), fake)
    runner.start()
    try:
        first = await hold_first_batch(runner, fake)
        # A long chunk and its document's short tail arrive together, twice, then a long one.
        lengths = (300, 40, 290, 50, 280)
        callers = [asyncio.create_task(runner.embed([f"t{n}"], [n])) for n in lengths]
        await asyncio.sleep(0.05)
        fake.hold.set()
        results = await asyncio.gather(first, *callers)
        assert [r[0, 0] for r in results[1:]] == [len(f"t{n}") for n in lengths]  # each caller its own row
        # In arrival order: [300, 40], [290, 50], [280] (padded to 600 + 580 + 280 tokens). Packed:
        # the oldest (300) with the closest that fits (290), the short ones together, then 280.
        assert fake.batches[1:] == [["t300", "t290"], ["t50", "t40"], ["t280"]]
        assert runner.queue.depth == 0
    finally:
        await runner.stop()


async def test_packing_skips_cancelled_passages_and_keeps_the_order_of_those_left(fake):
    runner = BatchRunner(BatchQueue(max_batch_tokens=100, max_queue=1000), fake)
    runner.start()
    try:
        first = await hold_first_batch(runner, fake)
        keep_a = asyncio.create_task(runner.embed(["a"], [90]))
        gone = asyncio.create_task(runner.embed(["gone"], [10]))
        keep_b = asyncio.create_task(runner.embed(["b"], [80]))
        keep_c = asyncio.create_task(runner.embed(["c"], [85]))
        await asyncio.sleep(0.05)
        gone.cancel()
        await asyncio.sleep(0.01)
        fake.hold.set()
        await asyncio.gather(first, keep_a, keep_b, keep_c)
        # Nothing fits beside 90 within 100 tokens; the cancelled one is never encoded; b before c.
        assert fake.batches[1:] == [["a"], ["b"], ["c"]]
        assert runner.queue.depth == 0
    finally:
        await runner.stop()


class OverlapEncoder:
    """Records how many forward passes run at once; each pass takes a little while."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.running = 0
        self.most = 0
        self.threads: set[str] = set()

    def encode(self, texts: list[str], *, query: bool = False) -> np.ndarray:
        with self._lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.threads.add(threading.current_thread().name)
        threading.Event().wait(0.05)
        with self._lock:
            self.running -= 1
        return np.array([[float(len(t)), 1.0] for t in texts], dtype=np.float32)


@pytest.mark.parametrize("lanes", [1, 2])
async def test_lanes_run_that_many_forward_passes_at_once_each_on_its_own_thread(lanes):
    encoder = OverlapEncoder()
    runner = BatchRunner(BatchQueue(max_batch_tokens=2, max_queue=1000), encoder, lanes=lanes)
    runner.start()
    try:
        texts = [f"text {n}" for n in range(12)]
        results = await asyncio.gather(*(runner.embed([t, t], [1, 1]) for t in texts))  # one batch each
        assert [float(r[0, 0]) for r in results] == [float(len(t)) for t in texts]
        assert encoder.most == lanes and len(encoder.threads) == lanes
    finally:
        await runner.stop()


class HoldsFirst(FakeEncoder):
    """Holds back only the batch of the text "first"."""

    def encode(self, texts: list[str], *, query: bool = False) -> np.ndarray:
        if texts == ["first"]:
            return super().encode(texts)
        self.batches.append(list(texts))
        return np.array([[float(len(t)), 1.0] for t in texts], dtype=np.float32)


async def test_with_two_lanes_a_query_does_not_wait_for_a_running_batch():
    encoder = HoldsFirst()
    runner = BatchRunner(BatchQueue(max_batch_tokens=10, max_queue=1000), encoder, lanes=2)
    runner.start()
    try:
        first = await hold_first_batch(runner, encoder)  # one lane held
        query = await asyncio.wait_for(runner.embed(["query"], [1], interactive=True), 5)  # the other lane
        assert float(query[0, 0]) == 5.0 and not first.done()
        encoder.hold.set()
        await first
    finally:
        encoder.hold.set()
        await runner.stop()


class OverlapReranker:
    """A cross-encoder that records whether two of its passes ever ran at once."""

    def __init__(self) -> None:
        self.scorer = OverlapEncoder()

    def score(self, pairs) -> np.ndarray:
        return self.scorer.encode([p.passage for p in pairs])[:, 0]


async def test_in_two_lanes_the_encoder_runs_twice_at_once_but_the_cross_encoder_never():
    from knowledge_embedder.domain.model import RerankPair

    encoder, reranker = OverlapEncoder(), OverlapReranker()
    runner = BatchRunner(BatchQueue(max_batch_tokens=1, max_queue=1000), encoder, reranker=reranker, lanes=2)
    runner.start()
    try:
        pairs = [RerankPair("q", f"passage {n}") for n in range(8)]
        texts = [f"text {n}" for n in range(8)]
        await asyncio.gather(*(runner.rerank([p], [1]) for p in pairs), *(runner.embed([t], [1]) for t in texts))
        assert encoder.most == 2 and reranker.scorer.most == 1
    finally:
        await runner.stop()
