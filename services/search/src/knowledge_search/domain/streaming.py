"""An answer sent as it is written: each piece passed on as soon as it is safe to.

Two things in a model's text only make sense whole: a citation marker (``[2]``, ``[1, 3]``),
which is renumbered as the final answer numbers it, and a placeholder of the anonymiser
(``<EMAIL_1>``), which is restored to the caller's own value. A piece that ends inside either is
held back until the rest arrives, so every delta a client shows is already what the final answer
says, and the deltas joined are the final text before its spacing is tidied.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from knowledge_search.domain.answer import Citer
from knowledge_search.domain.model import Relevance

# The tail of a piece that may still become a marker or a placeholder.
_OPEN_MARKER = re.compile(r"\[[\d\s,]*$")
_OPEN_PLACEHOLDER = re.compile(r"<[A-Z_0-9]*$")
# Past this, an unclosed "[" or "<" is text, not the start of something to wait for.
MAX_HELD = 32


class AnswerStream:
    def __init__(self, citer: Citer, restore: Callable[[str], str]) -> None:
        self._citer = citer
        self._restore = restore
        self._held = ""

    def feed(self, piece: str) -> str:
        """What of the text so far can be sent now (possibly nothing)."""
        text = self._held + piece
        cut = len(text)
        for pattern in (_OPEN_MARKER, _OPEN_PLACEHOLDER):
            match = pattern.search(text)
            if match is not None and len(text) - match.start() <= MAX_HELD:
                cut = min(cut, match.start())
        self._held = text[cut:]
        return self._emit(text[:cut])

    def finish(self) -> str:
        """Whatever was held back, once the model has finished."""
        held, self._held = self._held, ""
        return self._emit(held)

    def _emit(self, text: str) -> str:
        return self._restore(self._citer.markers(text)) if text else ""


@dataclass(frozen=True, slots=True)
class Started:
    """The head of a streamed answer: what it is built on."""

    relevance: Relevance
    condensed_query: str
    source_count: int
