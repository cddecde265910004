"""The batch runner: lanes that take formed batches from the queue, run them through the models on
threads of their own, and answer each input's caller.

It owns what blocks: the inference threads and the models. Callers submit through
:meth:`BatchRunner.embed` and :meth:`BatchRunner.rerank` and await one future per input. A batch
may hold texts and rerank pairs: texts go through the embedding model, pairs through the
cross-encoder, in the same batch.

Lanes: with ``lanes`` > 1 that many lanes take batches from the one queue, each running its
forward passes on a thread of its own, so a lane's batch runs while another lane's results go
back and the next batch forms. The ONNX encoder runs each pass single-threaded in a lane per
core: one single-threaded pass per core beats one pass spread over the cores, which waits for its
slowest thread at every operator. Torch keeps one lane: it spreads each pass over the cores itself.
The cross-encoder's passes never overlap, whatever the lanes: its tokenizer is not for two threads
at once.

Per stage: each input's wait in the queue, each batch's inference time, size and tokens
(metrics), and one span ``embedder.batch`` per batch.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeAlias, assert_never

import numpy as np
import structlog
from knowledge_runtime.tracing import tracer

from knowledge_embedder import metrics
from knowledge_embedder.batching.queue import BatchQueue, Pending, Priority
from knowledge_embedder.domain.errors import EmbedderStopping, RerankUnavailable
from knowledge_embedder.domain.model import ModelInput, Prompts, RerankPair, TextInput
from knowledge_embedder.domain.ports import Encoder, Reranker

log = structlog.get_logger("knowledge.embedder.queue")
_tracer = tracer("knowledge.embedder")

Result: TypeAlias = np.ndarray | np.float32  # a text's vector or a rerank pair's score
Waiter: TypeAlias = asyncio.Future[Result]  # one input's caller


class ForwardPass:
    """One batch through the models, one result per input in the batch's order. Blocking: the
    lanes call it from their threads."""

    def __init__(self, encoder: Encoder, reranker: Reranker | None, prompts: Prompts) -> None:
        self._encoder = encoder
        self._reranker = reranker
        self._prompts = prompts
        self._reranking = threading.Lock()  # the encoder may run in several lanes at once, the reranker in one

    def __call__(self, inputs: Sequence[ModelInput]) -> list[Result]:
        texts: dict[bool, list[tuple[int, str]]] = {False: [], True: []}  # passages, queries
        pairs: list[tuple[int, RerankPair]] = []
        for index, item in enumerate(inputs):
            match item:
                case TextInput(text=text, query=query):
                    texts[query].append((index, text))
                case RerankPair():
                    pairs.append((index, item))
                case _:
                    assert_never(item)
        results: dict[int, Result] = {}
        for query, group in texts.items():
            if group:
                prompted = self._prompts.applied([text for _, text in group], query=query)
                results.update(zip((index for index, _ in group), self._encoder.encode(prompted, query=query)))
        if not pairs:
            return [results[index] for index in range(len(inputs))]
        if self._reranker is None:  # the use case refuses before enqueueing; never reached
            raise RerankUnavailable()
        started = time.perf_counter()
        with self._reranking:
            scores = self._reranker.score([pair for _, pair in pairs])
        results.update((index, np.float32(score)) for (index, _), score in zip(pairs, scores))
        metrics.RERANK_SECONDS.observe(time.perf_counter() - started)
        return [results[index] for index in range(len(inputs))]


class BatchRunner:
    """Runs the queue's batches in ``lanes`` lanes, through ``encoder`` (and ``reranker``, when
    one is configured)."""

    def __init__(
        self,
        queue: BatchQueue[Waiter],
        encoder: Encoder,
        *,
        reranker: Reranker | None = None,
        lanes: int = 1,
        prompts: Prompts | None = None,
    ) -> None:
        self.queue = queue
        self._forward = ForwardPass(encoder, reranker, prompts or Prompts())
        self._lanes = max(1, lanes)
        self._tasks: list[asyncio.Task[None]] = []
        self._ready = asyncio.Event()  # something may be waiting in the queue
        # One inference thread per lane: a lane's passes never overlap, the event loop never blocks.
        self._executor = ThreadPoolExecutor(max_workers=self._lanes, thread_name_prefix="embedder-inference")
        self.batches = 0  # batches run so far (each one or more forward passes)

    def start(self) -> None:
        if not self._tasks:
            loop = asyncio.get_running_loop()
            self._tasks = [loop.create_task(self._lane(), name=f"embedder-lane-{n}") for n in range(self._lanes)]
            self.queue.open()

    async def stop(self) -> None:
        """The lanes stopped (the callers of the batches they ran fail as EmbedderStopping), then
        every caller still waiting in the queue fails so; nothing is admitted any more."""
        if self._tasks:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            self._tasks = []
        for entry in self.queue.close():
            if not entry.caller.done():
                entry.caller.set_exception(EmbedderStopping())
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def embed(
        self,
        texts: Sequence[str],
        tokens: Sequence[int],
        *,
        interactive: bool = False,
        query: bool = False,
        owner: str = "",
    ) -> np.ndarray:
        """Unit vectors for ``texts`` (one row each, in order), batched with everyone else's inputs;
        ``interactive`` inputs (a query someone waits for) go before bulk ones; ``query``: read
        with the model's query prompt; bulk inputs of tenant ``owner`` take their turn with other
        tenants'."""
        priority = Priority.INTERACTIVE if interactive else Priority.BULK
        return await self._submit([TextInput(text, query=query) for text in texts], tokens, priority, owner)

    async def rerank(self, pairs: Sequence[RerankPair], tokens: Sequence[int], *, owner: str = "") -> np.ndarray:
        """One cross-encoder score per pair, in order, batched with everyone else's inputs."""
        return await self._submit(pairs, tokens, Priority.BULK, owner)

    async def _submit(
        self, inputs: Sequence[ModelInput], tokens: Sequence[int], priority: Priority, owner: str
    ) -> np.ndarray:
        loop = asyncio.get_running_loop()
        admitted = self.queue.admit(priority, inputs, tokens, [loop.create_future() for _ in inputs], owner)
        for entry in admitted:
            entry.caller.add_done_callback(self._withdraw_if_cancelled(entry))
        self._ready.set()
        # A cancelled caller cancels these futures (gather propagates it): the queue skips them.
        results = await asyncio.gather(*(entry.caller for entry in admitted))
        return np.stack(results)

    def _withdraw_if_cancelled(self, entry: Pending[Waiter]) -> Callable[[Waiter], None]:
        def callback(future: Waiter) -> None:
            if future.cancelled():
                self.queue.withdraw(entry)

        return callback

    async def _lane(self) -> None:
        while True:
            await self._ready.wait()
            batch = self.queue.next_batch()
            if self.queue.empty:
                self._ready.clear()
            if batch:
                await self._run(batch)

    async def _run(self, batch: list[Pending[Waiter]]) -> None:
        started = time.perf_counter()
        for entry in batch:
            metrics.STAGE_SECONDS.labels(stage="queue").observe(started - entry.enqueued)
        tokens = sum(entry.tokens for entry in batch)
        inputs = [entry.input for entry in batch]
        try:
            with _tracer.start_as_current_span("embedder.batch") as span:
                span.set_attribute("embedder.batch_size", len(batch))
                span.set_attribute("embedder.batch_tokens", tokens)
                results = await asyncio.get_running_loop().run_in_executor(self._executor, self._forward, inputs)
        except asyncio.CancelledError:
            for entry in batch:
                if not entry.caller.done():
                    entry.caller.set_exception(EmbedderStopping())
            raise
        except Exception as error:  # noqa: BLE001 - a model failure fails this batch's callers, not the lane
            log.error("batch_failed", inputs=len(batch), error_type=type(error).__name__)
            for entry in batch:
                if not entry.caller.done():
                    entry.caller.set_exception(error)
            return
        self.batches += 1
        metrics.STAGE_SECONDS.labels(stage="inference").observe(time.perf_counter() - started)
        metrics.BATCH_SIZE.observe(len(batch))
        metrics.TOKENS.inc(tokens)
        for entry, result in zip(batch, results):
            if not entry.caller.done():
                entry.caller.set_result(result)
