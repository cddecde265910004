"""Readiness: whether a service can do its work now, from a periodic probe of what it depends on.

Liveness (the process answers, the overall ``""`` health service) and readiness (the named
services the Kubernetes readiness probes ask) are different questions. A service whose database
is down is alive — restarting it would not bring the database back — but not ready: traffic
should go elsewhere. :class:`ReadinessProbe` checks each hard :class:`Dependency` every
``interval_s`` (one cheap call, never per request), and tells its listener when the answer
changes, through the one outage record of each dependency that every observer in the process
shares (:mod:`knowledge_runtime.outages`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import structlog

from knowledge_runtime.outages import outage
from knowledge_runtime.periodic import Periodic

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
    _loop: Periodic | None = None

    async def start(self) -> None:
        if self.dependencies and self._loop is None:
            # Not jittered: readiness answers within one interval of a change.
            self._loop = Periodic(
                "readiness_probe", self._round, self.interval_s, jitter=0.0, first_after_interval=True
            )
            await self._loop.start()

    async def _round(self) -> None:
        await self.check_once()

    async def stop(self) -> None:
        if self._loop is not None:
            await self._loop.stop()
            self._loop = None

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
