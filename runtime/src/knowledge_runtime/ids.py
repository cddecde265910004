"""The one parser of the services' numeric identifiers (corpus, document, blob, page-token ids).

Identifiers are opaque strings to callers, and each has exactly one spelling: the ASCII decimal
digits of a positive int64 without a leading zero. Anything else — other scripts' digits (``١``,
``１``, ``²``), a sign, spaces, ``01`` aliasing ``1``, ``0``, a number past int64 — spells no id.
What that means is the caller's to say: a path id that spells none names nothing (NOT_FOUND, as
another tenant's would); a body id is refused with INVALID_ARGUMENT where the RPC documents that.
"""

from __future__ import annotations

import re

MAX_ID = 2**63 - 1  # PostgreSQL bigint
# ``[0-9]`` is the ASCII range only (``\d`` would take every script's digits); no leading zero.
_CANONICAL = re.compile(r"[1-9][0-9]{0,18}")


def parse_id(text: str) -> int | None:
    """The id ``text`` spells, or None when it spells none (see the module docstring)."""
    if not _CANONICAL.fullmatch(text):
        return None
    value = int(text)
    return value if value <= MAX_ID else None
