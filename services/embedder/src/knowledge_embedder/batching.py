"""One queue for every caller, in two priorities; workers (one per lane) form batches by a token budget.

Modelled on text-embeddings-inference's queue: callers enqueue their inputs with the token
count each costs and await one future per input; a single worker task forms a batch of up to
``max_batch_tokens`` (always at least one input), sorts it by length so that sub-batches pad
little, and runs the forward pass in a dedicated thread. Interactive inputs are taken in
arrival order. Bulk ones are packed: the oldest waiting input first (so every input
progresses), then, from the next ``PACK_WINDOW`` waiting ones, those closest to it in length,
as long as the batch's padding stays within ``PACK_WASTE`` of its tokens (or ``PACK_SLACK``
tokens). A forward pass costs its padded length, and in arrival order a long chunk and its
document's short tail arrive together: packed by length instead, a batch pads little.
Inputs whose caller went away (its RPC was cancelled) are skipped before their forward pass.
Past ``max_queue`` waiting inputs a caller is refused at once with RESOURCE_EXHAUSTED,
instead of waiting without bound. No artificial delay: inputs that arrive while a batch
runs form the next one.

Lanes: with ``lanes`` > 1 that many workers take batches from the one queue, each running its
forward passes on a thread of its own, so a lane's batch runs while another lane's results go
back and the next batch forms. The ONNX encoder runs each pass single-threaded in a lane per
core: one single-threaded pass per core beats one pass spread over the cores, which waits for its
slowest thread at every operator. Torch keeps one lane: it spreads each pass over the cores itself.

Two priorities. Interactive inputs (``embed(..., interactive=True)``: a person's or an agent's query)
go first: the next batch takes them before any bulk input (passages being ingested), so a query
waits at most for the batch already running, and bulk batches are capped at
``bulk_batch_tokens`` so that batch is short. Bounded both ways: after ``interactive_burst``
interactive batches in a row while bulk inputs wait, one bulk batch runs, so ingestion always
progresses; and each priority is admitted against ``max_queue`` on its own, so a full bulk backlog
never refuses a query.

A lane is a parallel worker; a priority is interactive or bulk: every lane serves both priorities.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import structlog
from knowledge_runtime.tracing import tracer

from knowledge_embedder import metrics
from knowledge_embedder.domain.errors import EmbedderStopping, QueueFull

log = structlog.get_logger("knowledge.embedder.queue")

PACK_WINDOW = 256  # waiting bulk inputs looked at to fill a batch around the oldest one
PACK_WASTE = 0.15  # the padding a packed batch may carry, as a share of its tokens
PACK_SLACK = 16  # ... or this many tokens, whichever is more
_tracer = tracer("knowledge.embedder")


@dataclass(eq=False)
class _Input:
    text: str
    tokens: int
    future: asyncio.Future
    enqueued: float = field(default_factory=time.perf_counter)
    counted: bool = True  # still part of the queue depth
    interactive: bool = False


class BatchQueue:
    def __init__(
        self,
        encode: Callable[[list[Any]], Any],  # texts (or rerank pairs) -> one result per input, in order
        *,
        max_batch_tokens: int,
        max_queue: int,
        bulk_batch_tokens: int | None = None,
        interactive_burst: int = 4,
        lanes: int = 1,
    ) -> None:
        self._encode = encode
        self._max_batch_tokens = max_batch_tokens
        self._bulk_batch_tokens = min(bulk_batch_tokens or max_batch_tokens, max_batch_tokens)
        self._interactive_burst = max(interactive_burst, 1)
        self._max_queue = max_queue
        self._bulk: deque[_Input] = deque()
        self._interactive: deque[_Input] = deque()
        self._waiting = 0
        self._waiting_interactive = 0
        self._streak = 0  # interactive batches run in a row while bulk inputs waited
        self._ready = asyncio.Event()
        self._lanes = max(1, lanes)
        self._workers: list[asyncio.Task] = []
        # One inference thread per lane: a lane's passes never overlap, the event loop never blocks.
        self._executor = ThreadPoolExecutor(max_workers=self._lanes, thread_name_prefix="embedder-inference")
        self.batches = 0  # batches run so far (each one or more forward passes)

    @property
    def depth(self) -> int:
        """Inputs waiting for a forward pass (callers that went away excluded)."""
        return self._waiting

    def start(self) -> None:
        if not self._workers:
            loop = asyncio.get_running_loop()
            self._workers = [loop.create_task(self._run(), name=f"embedder-lane-{lane}") for lane in range(self._lanes)]

    async def stop(self) -> None:
        if self._workers:
            for worker in self._workers:
                worker.cancel()
            await asyncio.gather(*self._workers, return_exceptions=True)
            self._workers = []
        for waiting in (self._interactive, self._bulk):
            while waiting:
                item = waiting.popleft()
                self._uncount(item)
                if not item.future.done():
                    item.future.set_exception(EmbedderStopping())
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def embed(self, texts: Sequence[Any], tokens: Sequence[int], *, interactive: bool = False) -> Any:
        """Vectors for ``texts`` (one row each, in order), batched with everyone else's inputs;
        ``interactive`` inputs (a query someone waits for) go before bulk ones."""
        waiting = self._waiting_interactive if interactive else self._waiting - self._waiting_interactive
        if waiting + len(texts) > self._max_queue:
            metrics.REJECTED.inc(len(texts))
            raise QueueFull(waiting, self._max_queue)
        if not self._workers:
            raise EmbedderStopping()
        loop = asyncio.get_running_loop()
        items = [
            _Input(text, count, loop.create_future(), interactive=interactive)
            for text, count in zip(texts, tokens, strict=True)
        ]
        waiting = self._interactive if interactive else self._bulk
        for item in items:
            item.future.add_done_callback(self._uncount_if_cancelled(item))
            waiting.append(item)
        self._waiting += len(items)
        if interactive:
            self._waiting_interactive += len(items)
        metrics.QUEUE_DEPTH.set(self._waiting)
        self._ready.set()
        # A cancelled caller cancels these futures (gather propagates it): the worker skips them.
        rows = await asyncio.gather(*(item.future for item in items))
        return np.stack(rows)

    def _uncount_if_cancelled(self, item: _Input) -> Callable[[asyncio.Future[Any]], None]:
        def callback(future: asyncio.Future[Any]) -> None:
            if future.cancelled():
                self._uncount(item)

        return callback

    def _uncount(self, item: _Input) -> None:
        if item.counted:
            item.counted = False
            self._waiting -= 1
            if item.interactive:
                self._waiting_interactive -= 1
            metrics.QUEUE_DEPTH.set(self._waiting)

    def _next_batch(self) -> list[_Input]:
        """Interactive inputs first, unless bulk ones have waited ``interactive_burst`` batches."""
        if self._interactive and (self._streak < self._interactive_burst or not self._bulk):
            batch = self._take(self._interactive, self._max_batch_tokens)
            if batch:
                self._streak += 1 if self._bulk else 0
                return batch
        self._streak = 0
        return self._pack(self._bulk, self._bulk_batch_tokens) or self._take(self._interactive, self._max_batch_tokens)

    def _pack(self, waiting: deque[_Input], max_tokens: int) -> list[_Input]:
        """The oldest live input and, among the next ``PACK_WINDOW``, those closest to it in
        length while the batch fits ``max_tokens`` and pads little; sorted longest first."""
        head = self._take(waiting, 0)  # the oldest live input, alone
        if not head or not waiting:
            return head
        first = head[0]
        window = [waiting.popleft() for _ in range(min(PACK_WINDOW, len(waiting)))]
        batch, tokens, longest = [first], first.tokens, first.tokens
        chosen: set[int] = set()
        for index in sorted(range(len(window)), key=lambda i: abs(window[i].tokens - first.tokens)):
            item = window[index]
            if item.future.done() or tokens + item.tokens > max_tokens:
                continue
            padded = max(longest, item.tokens) * (len(batch) + 1)
            if padded - (tokens + item.tokens) > max(PACK_WASTE * (tokens + item.tokens), PACK_SLACK):
                continue
            batch.append(item)
            chosen.add(index)
            tokens += item.tokens
            longest = max(longest, item.tokens)
        # The rest go back in their order, ahead of everything behind the window.
        waiting.extendleft(reversed([item for i, item in enumerate(window) if i not in chosen]))
        for item in batch[1:]:
            self._uncount(item)
        batch.sort(key=lambda item: item.tokens, reverse=True)
        return batch

    def _take(self, waiting: deque[_Input], max_tokens: int) -> list[_Input]:
        batch: list[_Input] = []
        budget = 0
        while waiting:
            item = waiting[0]
            if item.future.done():  # its caller went away: no forward pass for it
                waiting.popleft()
                self._uncount(item)
                metrics.SKIPPED.inc()
                continue
            if batch and budget + item.tokens > max_tokens:
                break
            waiting.popleft()
            self._uncount(item)
            batch.append(item)
            budget += item.tokens
        batch.sort(key=lambda item: item.tokens, reverse=True)
        return batch

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._ready.wait()
            batch = self._next_batch()
            if not self._bulk and not self._interactive:
                self._ready.clear()
            if not batch:
                continue
            started = time.perf_counter()
            for item in batch:
                metrics.STAGE_SECONDS.labels(stage="queue").observe(started - item.enqueued)
            tokens = sum(item.tokens for item in batch)
            try:
                with _tracer.start_as_current_span("embedder.batch") as span:
                    span.set_attribute("embedder.batch_size", len(batch))
                    span.set_attribute("embedder.batch_tokens", tokens)
                    vectors = await loop.run_in_executor(self._executor, self._encode, [i.text for i in batch])
            except asyncio.CancelledError:
                for item in batch:
                    if not item.future.done():
                        item.future.set_exception(EmbedderStopping())
                raise
            except Exception as error:  # noqa: BLE001 - a model failure fails this batch's callers, not the worker
                log.error("batch_failed", inputs=len(batch), error_type=type(error).__name__)
                for item in batch:
                    if not item.future.done():
                        item.future.set_exception(error)
                continue
            self.batches += 1
            metrics.STAGE_SECONDS.labels(stage="inference").observe(time.perf_counter() - started)
            metrics.BATCH_SIZE.observe(len(batch))
            metrics.TOKENS.inc(tokens)
            for item, vector in zip(batch, vectors):
                if not item.future.done():
                    item.future.set_result(vector)
