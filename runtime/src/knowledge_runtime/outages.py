"""One record per dependency of the process, shared by every observer: a known outage is logged
when it starts and when it ends, never once per failed poll, whether the readiness probe or a
background loop noticed it first."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import structlog

log = structlog.get_logger("knowledge.health")


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
