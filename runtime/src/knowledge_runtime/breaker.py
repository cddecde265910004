"""A circuit breaker for a dependency whose outage would otherwise cost every request a deadline:
search's before the embedder, the embedder's before a remote embedding server.

A stopped embedder (SIGSTOP, a hung node) accepts the connection and never answers, so each call
waits until its caller's deadline: a pre-fetch spends its whole 300 ms and answers empty. With the
breaker, one failure (an error, or a call still unanswered after ``slow_s`` when its caller gives
up) opens it; while open, calls are refused at once (the caller takes its fallback: the keyword
channel). After ``cool_off_s`` one call is let through as a probe (half-open); its success closes
the breaker, its failure opens it again for another cool-off; a success at any time (a call given
up on that answers late: the embedder was cold, not stopped) closes it. Pure: the clock is given,
so tests use a fake one.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field

DEFAULT_COOL_OFF_S = 5.0  # KNOWLEDGE_SEARCH_EMBEDDER_COOL_OFF_S; 0 disables the breaker
DEFAULT_SLOW_S = 0.2  # a call cancelled after this long counts as a failure (slow_within caps it)
# A silence counts from the embedding call's start, which comes after a pre-fetch's deadline
# started (the housekeeping corpora are looked up first): this share of the deadline leaves room.
DEADLINE_SHARE = 2 / 3


def slow_within(deadline_s: float) -> float:
    """``slow_s`` for callers that give up after ``deadline_s`` (the pre-fetch deadline): a call
    abandoned at that deadline must count as a failure, else the breaker never opens."""
    return min(DEFAULT_SLOW_S, DEADLINE_SHARE * deadline_s)


class BreakerState(enum.Enum):
    CLOSED = "closed"  # calls go through
    OPEN = "open"  # calls are refused until the cool-off ends
    HALF_OPEN = "half_open"  # one probe is in flight; other calls are refused


@dataclass
class CircuitBreaker:
    clock: Callable[[], float]
    cool_off_s: float = DEFAULT_COOL_OFF_S
    slow_s: float = DEFAULT_SLOW_S
    state: BreakerState = BreakerState.CLOSED
    _opened_at: float = field(default=0.0, repr=False)

    def allow(self) -> bool:
        """Whether a call may go to the dependency now (an open breaker past its cool-off lets
        exactly one through, the probe)."""
        if self.state is BreakerState.CLOSED:
            return True
        if self.state is BreakerState.OPEN and self.clock() - self._opened_at >= self.cool_off_s:
            self.state = BreakerState.HALF_OPEN
            return True
        return False

    def succeeded(self) -> None:
        self.state = BreakerState.CLOSED

    def failed(self) -> None:
        """An error the dependency's outage explains (unreachable, timed out): open for a cool-off."""
        self.state = BreakerState.OPEN
        self._opened_at = self.clock()

    def abandoned(self, started: float) -> bool:
        """The caller gave up on a call begun at ``started`` (its deadline passed): a failure when
        the dependency had been silent that long (True); a probe given up on sooner lets the next
        call probe."""
        if self.clock() - started >= self.slow_s:
            self.failed()
            return True
        if self.state is BreakerState.HALF_OPEN:
            self.state = BreakerState.OPEN  # still past the cool-off: the next allow() probes again
        return False
