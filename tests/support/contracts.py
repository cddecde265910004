"""What the contract's e2e modules (tests/e2e/contracts) share: their stack's limits."""

from __future__ import annotations

CAP = 1024 * 1024  # the stack's upload cap: cheap to cross
RATE_BURST, RATE_RPS = 30, 10  # its per-tenant rate limit: one tenant crosses it in a few calls
