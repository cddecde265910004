"""Readiness: whether a service can do its work now, from a periodic probe of what it depends on.

Liveness (the process answers, the overall ``""`` health service) and readiness (the named
services the Kubernetes readiness probes ask) are different questions. A service whose database
is down is alive — restarting it would not bring the database back — but not ready: traffic
should go elsewhere. :class:`ReadinessProbe` checks each hard :class:`Dependency` every
``interval_s`` (one cheap call, never per request), and tells its listener when the answer
changes. :class:`Outage` is the one-line-per-outage log every observer of a dependency in the
process shares (:func:`outage`): a known outage is logged when it starts and when it ends, never
once per failed poll, whether the probe or a worker's loop noticed it first.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

log = structlog.get_logger("knowledge.health")

DEFAULT_INTERVAL_S = 1.0
DEFAULT_TIMEOUT_S = 2.0
FAILURES_TO_DOWN = 2  # consecutive failed checks before a dependency counts as down (one may be a blip)


@dataclass(frozen=True)
class Dependency:
    """Something the service cannot work without; ``check`` raises (or times out) when it is not usable."""

    name: str
    check: Callable[[], Awaitable[object]]


def database(db: object) -> Dependency:
    """The service's PostgreSQL: one ``SELECT 1`` through its pool."""
    return Dependency("database", lambda: db.fetchval("readiness_ping", "SELECT 1"))  # type: ignore[attr-defined]


@dataclass
class Outage:
    """Logs ``<dependency>_unavailable`` once when a dependency starts failing and
    ``<dependency>_available`` once when it works again (with how long it was out)."""

    dependency: str
    logger: Any = field(default=log)
    since: float | None = None

    @property
    def down(self) -> bool:
        return self.since is not None

    def failed(self, error: BaseException | None = None) -> None:
        if self.since is None:
            self.since = time.monotonic()
            self.logger.warning(
                "dependency_unavailable",
                dependency=self.dependency,
                error_type=type(error).__name__ if error is not None else None,
            )

    def succeeded(self) -> None:
        if self.since is not None:
            self.logger.info(
                "dependency_available",
                dependency=self.dependency,
                down_s=round(time.monotonic() - self.since, 1),
            )
            self.since = None


_OUTAGES: dict[str, Outage] = {}


def outage(dependency: str) -> Outage:
    """The process's one :class:`Outage` of ``dependency``, shared by everyone who calls it."""
    return _OUTAGES.setdefault(dependency, Outage(dependency))


@dataclass
class ReadinessProbe:
    """Checks every dependency each ``interval_s``; ``on_change(ready)`` on every change of the answer."""

    dependencies: list[Dependency]
    on_change: Callable[[bool], Awaitable[None]]
    interval_s: float = DEFAULT_INTERVAL_S
    timeout_s: float = DEFAULT_TIMEOUT_S
    failures_to_down: int = FAILURES_TO_DOWN
    ready: bool = True
    _failures: dict[str, int] = field(default_factory=dict)
    _down: set[str] = field(default_factory=set)
    _task: asyncio.Task | None = None

    def start(self) -> None:
        if self.dependencies and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="readiness-probe")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def check_once(self) -> bool:
        """Check every dependency now; returns (and reports on change) whether all are usable."""
        for dependency in self.dependencies:
            try:
                async with asyncio.timeout(self.timeout_s):  # a cancel always propagates (wait_for could drop one)
                    await dependency.check()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - any failure of the check: the dependency is not usable
                self._failures[dependency.name] = self._failures.get(dependency.name, 0) + 1
                if self._failures[dependency.name] >= self.failures_to_down:
                    self._down.add(dependency.name)
                    outage(dependency.name).failed(error)
            else:
                self._failures[dependency.name] = 0
                self._down.discard(dependency.name)
                outage(dependency.name).succeeded()
        ready = not self._down
        if ready != self.ready:
            self.ready = ready
            log.info("readiness_changed", ready=ready, down=sorted(self._down))
            await self.on_change(ready)
        return ready

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.check_once()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - the probe itself must never die
                log.warning("readiness_probe_failed", error_type=type(error).__name__)
