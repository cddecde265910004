"""One helper for every background loop of every service: start, stop, interval, jitter, and
errors logged once per outage.

A :class:`Periodic` runs ``step`` again and again until it is stopped. Between two steps it
waits ``interval_s`` (give or take ``jitter``, so that the replicas of a service do not all hit
the database in the same instant), or less when a wakeup fires. A step that answers ``True``
says there is more to do at once (a full batch, a job just run) and is called again without
waiting.

A failing step never ends the loop. Its first failure is logged as ``<name>_failed`` and its
recovery as ``<name>_recovered``, with how long it was failing, so an outage is two lines, not
one per round. A step that raises ``Unavailable`` found its ``dependency`` away (the database,
unless told otherwise): that goes to the process's one record of that outage (``outages.outage``),
which every loop and the readiness probe share, so the database going away is logged once, not
once per loop.

``stop()`` cancels the loop and waits for it; a step in flight is abandoned (the work it leased
expires and is taken over, which is what every loop here already relies on).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Protocol

import structlog

from knowledge_runtime.errors import Unavailable
from knowledge_runtime.outages import outage

log = structlog.get_logger("knowledge.periodic")


class Wakeup(Protocol):
    """Something that can end a wait early (a LISTEN/NOTIFY subscription)."""

    def clear(self) -> None: ...

    async def wait(self, timeout_s: float) -> bool: ...


Step = Callable[[], Awaitable[bool | None]]


class Periodic:
    def __init__(
        self,
        name: str,
        step: Step,
        interval_s: float,
        *,
        jitter: float = 0.1,
        wakeup: Callable[[], AbstractContextManager[Wakeup]] | None = None,
        first_after_interval: bool = False,
        dependency: str = "database",
    ) -> None:
        """``name`` names the log lines (snake_case); ``jitter`` is the share of the interval a
        wait may be shorter or longer by; ``wakeup`` opens the subscription whose signal ends a
        wait early (cleared before each step, so a signal during the step is not lost);
        ``first_after_interval`` waits before the first step instead of running it at once."""
        if interval_s <= 0:
            raise ValueError(f"{name}: the interval must be positive")
        if not 0.0 <= jitter < 1.0:
            raise ValueError(f"{name}: jitter must be in [0, 1)")
        self.name = name
        self._step = step
        self._interval_s = interval_s
        self._jitter = jitter
        self._wakeup = wakeup
        self._first_after_interval = first_after_interval
        self._task: asyncio.Task[None] | None = None
        self._failing_since: float | None = None
        self._dependency = outage(dependency)
        self._dependency_failed = False

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def next_wait(self) -> float:
        """The interval, moved by up to ``jitter`` of itself either way."""
        return self._interval_s * (1.0 + self._jitter * (2.0 * random.random() - 1.0))

    async def _run(self) -> None:
        with self._wakeup() if self._wakeup is not None else nullcontext() as wakeup:
            if self._first_after_interval:
                await self._wait(wakeup)
            while True:
                if wakeup is not None:
                    wakeup.clear()
                if await self._once():
                    await asyncio.sleep(0)  # more to do: again at once, letting others run first
                    continue
                await self._wait(wakeup)

    async def _wait(self, wakeup: Wakeup | None) -> None:
        if wakeup is None:
            await asyncio.sleep(self.next_wait())
        else:
            await wakeup.wait(self.next_wait())

    async def _once(self) -> bool:
        try:
            more = await self._step()
        except asyncio.CancelledError:
            raise
        except Unavailable as error:
            _stop_if_cancelled(error)
            self._dependency.failed(error)
            self._dependency_failed = True
            return False
        except Exception as error:  # noqa: BLE001 - the loop must outlive any one failure; logged once per outage
            _stop_if_cancelled(error)
            self._failed(error)
            return False
        _stop_if_cancelled()
        self._succeeded()
        return bool(more)

    def _failed(self, error: Exception) -> None:
        if self._failing_since is None:
            self._failing_since = time.monotonic()
            log.warning(f"{self.name}_failed", error_type=type(error).__name__)

    def _succeeded(self) -> None:
        if self._failing_since is not None:
            log.info(f"{self.name}_recovered", failing_s=round(time.monotonic() - self._failing_since, 1))
            self._failing_since = None
        if self._dependency_failed:
            self._dependency.succeeded()
            self._dependency_failed = False


def _stop_if_cancelled(error: BaseException | None = None) -> None:
    """Raise CancelledError if this task was asked to stop during the step. A step can lose the
    request: cancelled inside a database transaction whose connection is gone, the rollback's own
    error replaces the CancelledError, and the step's ``except Exception`` takes it as a failure.
    The loop would then run on, and whoever stops it wait for ever."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError from error


class Runs(Protocol):
    """A :class:`Periodic`, or something that runs several (a pool of workers)."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class Background:
    """A process's background loops: started in order once the server listens, stopped newest
    first before the resources they use are closed."""

    def __init__(self, loops: Sequence[Runs] = ()) -> None:
        self.loops = list(loops)

    async def start(self) -> None:
        for loop in self.loops:
            await loop.start()

    async def stop(self) -> None:
        for loop in reversed(self.loops):
            await loop.stop()
