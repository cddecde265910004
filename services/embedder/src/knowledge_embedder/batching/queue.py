"""The batch queue: admission, two priorities, batch formation by a token budget.

Callers' inputs wait here with the token count each costs; :meth:`BatchQueue.next_batch` forms
one batch of up to ``max_batch_tokens`` (always at least one input), sorted by length so that the
forward passes it is cut into pad little. Nothing here awaits, blocks or starts a thread: the
runner asks for batches and reports the callers that went away.

Two priorities. Interactive inputs (a person's or an agent's query) go first: the next batch
takes them, in arrival order, before any bulk input (passages being ingested), so a query waits
at most for the batches already running, and bulk batches are capped at ``bulk_batch_tokens`` so
those are short. Bounded both ways: after ``interactive_burst`` interactive batches in a row while
bulk inputs wait, one bulk batch is formed, so ingestion always progresses; and each priority is
admitted against ``max_queue`` on its own, so a full bulk backlog never refuses a query.

Bulk inputs are packed: the oldest waiting one first (so every input progresses), then, from the
next ``PACK_WINDOW`` waiting ones, those closest to it in length, as long as the batch's padding
stays within ``PACK_WASTE`` of its tokens (or ``PACK_SLACK`` tokens). A forward pass costs its
padded length, and in arrival order a long chunk and its document's short tail arrive together:
packed by length instead, a batch pads little.

Bulk inputs are shared fairly between tenants: each tenant's wait in a queue of its own, and bulk
batches are formed from one tenant after another in turn. A tenant's 3,000-chunk document then
delays another tenant's one-page upload by one batch per turn, not by the whole document.

Inputs whose caller went away (its RPC was cancelled) stop counting at once and are skipped when
a batch forms: no forward pass for them. Past ``max_queue`` waiting inputs of its priority a
caller is refused at once with RESOURCE_EXHAUSTED, instead of waiting without bound. No
artificial delay: inputs that arrive while a batch runs form the next one.
"""

from __future__ import annotations

import enum
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from knowledge_embedder import metrics
from knowledge_embedder.domain.errors import EmbedderStopping, QueueFull
from knowledge_embedder.domain.model import ModelInput

PACK_WINDOW = 256  # waiting bulk inputs looked at to fill a batch around the oldest one
PACK_WASTE = 0.15  # the padding a packed batch may carry, as a share of its tokens
PACK_SLACK = 16  # ... or this many tokens, whichever is more


class Priority(enum.Enum):
    INTERACTIVE = "interactive"  # someone waits for it: a query
    BULK = "bulk"  # passages being ingested, anchors, rerank pairs


class Caller(Protocol):
    """Who waits for an input's result, as far as the queue needs to know: done once answered
    or gone (its RPC cancelled)."""

    def done(self) -> bool: ...


C = TypeVar("C", bound=Caller)


@dataclass(eq=False)
class Pending(Generic[C]):
    """One input in the queue: what it costs and who waits for it."""

    input: ModelInput
    tokens: int
    caller: C
    priority: Priority
    owner: str = ""  # the tenant it is for: bulk batches take tenants in turn
    enqueued: float = field(default_factory=time.perf_counter)
    counted: bool = True  # still part of the queue depth


class BatchQueue(Generic[C]):
    """The waiting inputs of both priorities; :meth:`next_batch` decides which run next."""

    def __init__(
        self,
        *,
        max_batch_tokens: int,
        max_queue: int,
        bulk_batch_tokens: int | None = None,
        interactive_burst: int = 4,
    ) -> None:
        self.max_batch_tokens = max_batch_tokens
        self.bulk_batch_tokens = min(bulk_batch_tokens or max_batch_tokens, max_batch_tokens)
        self._interactive_burst = max(interactive_burst, 1)
        self._max_queue = max_queue
        self._interactive: deque[Pending[C]] = deque()
        # Bulk inputs by tenant, the tenants in the order their turns come (see ``_bulk``).
        self._bulk: dict[str, deque[Pending[C]]] = {}
        self._counted: dict[Priority, int] = dict.fromkeys(Priority, 0)
        self._streak = 0  # interactive batches formed in a row while bulk inputs waited
        self._open = False

    @property
    def depth(self) -> int:
        """Inputs waiting for a forward pass (callers that went away excluded): what the
        autoscaler scales on."""
        return sum(self._counted.values())

    @property
    def empty(self) -> bool:
        """Nothing left to look at, not even an input whose caller went away."""
        return not self._interactive and not self._bulk

    def open(self) -> None:
        """Admit inputs from now on: something takes batches."""
        self._open = True

    def admit(
        self,
        priority: Priority,
        inputs: Sequence[ModelInput],
        tokens: Sequence[int],
        callers: Sequence[C],
        owner: str = "",
    ) -> list[Pending[C]]:
        """One call's inputs queued at ``priority`` (one caller each) for tenant ``owner``, or all
        of them refused: QueueFull past ``max_queue`` waiting inputs of that priority,
        EmbedderStopping when the queue is not open."""
        waiting = self._counted[priority]
        if waiting + len(inputs) > self._max_queue:
            metrics.REJECTED.inc(len(inputs))
            raise QueueFull(waiting, self._max_queue)
        if not self._open:
            raise EmbedderStopping()
        admitted = [
            Pending(item, count, caller, priority, owner)
            for item, count, caller in zip(inputs, tokens, callers, strict=True)
        ]
        if priority is Priority.INTERACTIVE:
            self._interactive.extend(admitted)
        else:
            self._bulk.setdefault(owner, deque()).extend(admitted)
        self._counted[priority] += len(admitted)
        metrics.QUEUE_DEPTH.set(self.depth)
        return admitted

    def withdraw(self, entry: Pending[C]) -> None:
        """Its caller went away: it stops counting now and is skipped when a batch forms."""
        self._uncount(entry)

    def close(self) -> list[Pending[C]]:
        """Admit nothing more; every input still waiting taken out, interactive ones first."""
        self._open = False
        left: list[Pending[C]] = []
        for waiting in (self._interactive, *self._bulk.values()):
            while waiting:
                entry = waiting.popleft()
                self._uncount(entry)
                left.append(entry)
        self._bulk.clear()
        return left

    def next_batch(self) -> list[Pending[C]]:
        """The next batch, longest input first (empty when every waiting caller went away):
        interactive inputs, unless bulk ones have waited ``interactive_burst`` batches."""
        interactive, bulk = self._interactive, bool(self._bulk)
        if interactive and (self._streak < self._interactive_burst or not bulk):
            batch = self._take(interactive, self.max_batch_tokens)
            if batch:
                self._streak += 1 if bulk else 0
                return batch
        self._streak = 0
        return self._next_bulk() or self._take(interactive, self.max_batch_tokens)

    def _next_bulk(self) -> list[Pending[C]]:
        """A bulk batch of the tenant whose turn it is, that tenant then last in turn (dropped
        when nothing of it is left); tenants with only gone callers are passed over."""
        while self._bulk:
            owner = next(iter(self._bulk))
            waiting = self._bulk.pop(owner)
            batch = self._pack(waiting, self.bulk_batch_tokens)
            if waiting:
                self._bulk[owner] = waiting  # re-inserted: at the end of the turns
            if batch:
                return batch
        return []

    def _pack(self, waiting: deque[Pending[C]], max_tokens: int) -> list[Pending[C]]:
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
            entry = window[index]
            if entry.caller.done() or tokens + entry.tokens > max_tokens:
                continue
            padded = max(longest, entry.tokens) * (len(batch) + 1)
            if padded - (tokens + entry.tokens) > max(PACK_WASTE * (tokens + entry.tokens), PACK_SLACK):
                continue
            batch.append(entry)
            chosen.add(index)
            tokens += entry.tokens
            longest = max(longest, entry.tokens)
        # The rest go back in their order, ahead of everything behind the window.
        waiting.extendleft(reversed([entry for i, entry in enumerate(window) if i not in chosen]))
        for entry in batch[1:]:
            self._uncount(entry)
        batch.sort(key=lambda entry: entry.tokens, reverse=True)
        return batch

    def _take(self, waiting: deque[Pending[C]], max_tokens: int) -> list[Pending[C]]:
        """Inputs in arrival order while they fit ``max_tokens`` (the first always does)."""
        batch: list[Pending[C]] = []
        budget = 0
        while waiting:
            entry = waiting[0]
            if entry.caller.done():  # its caller went away: no forward pass for it
                waiting.popleft()
                self._uncount(entry)
                metrics.SKIPPED.inc()
                continue
            if batch and budget + entry.tokens > max_tokens:
                break
            waiting.popleft()
            self._uncount(entry)
            batch.append(entry)
            budget += entry.tokens
        batch.sort(key=lambda entry: entry.tokens, reverse=True)
        return batch

    def _uncount(self, entry: Pending[C]) -> None:
        if entry.counted:
            entry.counted = False
            self._counted[entry.priority] -= 1
            metrics.QUEUE_DEPTH.set(self.depth)
