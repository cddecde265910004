"""Which of the things in reach a model most likely meant by a name or id that named none.

Small models mistype ids, pass a filename or a title where an id goes, or an id of something
they saw in another answer. The candidates are ranked: an exact id or name first (what was meant
is there under another kind of name), then names containing what was asked (or contained in
it), then by string similarity of the id and of the name.
"""

from __future__ import annotations

from collections.abc import Sequence
from difflib import SequenceMatcher

from knowledge_mcp.domain.contract import Suggestion

DEFAULT_LIMIT = 5


def _score(asked: str, candidate: Suggestion) -> float:
    wanted, label, ident = asked.strip().lower(), candidate.label.lower(), candidate.id.lower()
    if not wanted:
        return 0.0
    if wanted in (ident, label):
        return 3.0
    similarity = max(SequenceMatcher(None, wanted, ident).ratio(), SequenceMatcher(None, wanted, label).ratio())
    if label and (wanted in label or label in wanted):
        return 2.0 + similarity
    return similarity


def likely(asked: str, candidates: Sequence[Suggestion], limit: int = DEFAULT_LIMIT) -> tuple[Suggestion, ...]:
    """At most ``limit`` candidates, the likeliest first (ties keep the given order: the newest
    first when the caller lists them so)."""
    ranked = sorted(enumerate(candidates), key=lambda item: (-_score(asked, item[1]), item[0]))
    return tuple(candidate for _, candidate in ranked[:limit])
