"""No extracted value without evidence.

A model that fills a schema must say, for every value, which chunk it read it from and quote
the span. :func:`checked` keeps a value only when its quote is found in the chunk it cites
(whitespace and case folded, so a line break or a capital does not lose a true quote) and
reports every value it drops, with why; a value is never kept on the model's word alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MAX_QUOTE_CHARS = 500
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class SourceChunk:
    chunk_id: int
    content: str
    page: int | None = None
    section: str = ""


@dataclass(frozen=True, slots=True)
class Evidence:
    chunk_id: int
    quote: str
    page: int | None = None
    section: str = ""


@dataclass(frozen=True, slots=True)
class ExtractedValue:
    field: str
    value: Any
    evidence: Evidence


@dataclass(frozen=True, slots=True)
class Dropped:
    field: str
    why: str


@dataclass(frozen=True, slots=True)
class Checked:
    values: tuple[ExtractedValue, ...]
    dropped: tuple[Dropped, ...]


def normalised(text: str) -> str:
    return _SPACES.sub(" ", text).strip().casefold()


def checked(claims: Sequence[Mapping[str, Any]], chunks: Sequence[SourceChunk]) -> Checked:
    """``claims``: the model's values, each ``{"field", "value", "chunk_id", "quote"}``. Kept:
    those whose quote (non-empty, at most 500 characters) is in the cited chunk, with that
    chunk's page and section; the rest dropped, each with its reason."""
    by_id = {chunk.chunk_id: chunk for chunk in chunks}
    kept: list[ExtractedValue] = []
    dropped: list[Dropped] = []
    for claim in claims:
        name = str(claim.get("field", ""))
        quote = claim.get("quote")
        chunk_id = claim.get("chunk_id")
        if not isinstance(quote, str) or not quote.strip():
            dropped.append(Dropped(name, "no quote"))
            continue
        if len(quote) > MAX_QUOTE_CHARS:
            dropped.append(Dropped(name, f"quote longer than {MAX_QUOTE_CHARS} characters"))
            continue
        chunk = by_id.get(chunk_id) if isinstance(chunk_id, int) and not isinstance(chunk_id, bool) else None
        if chunk is None:
            dropped.append(Dropped(name, "cites no chunk the model was given"))
            continue
        if normalised(quote) not in normalised(chunk.content):
            dropped.append(Dropped(name, f"quote not found in chunk {chunk.chunk_id}"))
            continue
        kept.append(
            ExtractedValue(name, claim.get("value"), Evidence(chunk.chunk_id, quote.strip(), chunk.page, chunk.section))
        )
    return Checked(tuple(kept), tuple(dropped))
