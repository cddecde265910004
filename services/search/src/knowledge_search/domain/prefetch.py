"""Pre-fetch: suggested context for a chat turn from the tenant's housekeeping corpora.

What it shows and how it reads is decided here; the use case only retrieves. The rendered
block is empty when nothing relevant was found, so a caller can add it to a system prompt as is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from knowledge_runtime.system_corpora import DATA_CATALOG, OPERATIONAL_PATTERNS, USER_BEHAVIOR

from knowledge_search.domain.model import SearchHit

PREFETCH_DEADLINE_S = 0.3  # KNOWLEDGE_PREFETCH_DEADLINE_MS's default
HEADINGS = {
    OPERATIONAL_PATTERNS: "Operational patterns:",
    USER_BEHAVIOR: "This user's habits:",
    DATA_CATALOG: "Data catalog:",
}


@dataclass(frozen=True, slots=True)
class Section:
    name: str  # the housekeeping corpus it comes from
    hits: tuple[SearchHit, ...]


@dataclass(frozen=True, slots=True)
class Prefetch:
    rendered: str
    degradations: tuple[str, ...]
    entry_count: int
    elapsed_ms: int

    @property
    def degraded(self) -> bool:
        return bool(self.degradations)

    @classmethod
    def empty(cls, why: str, elapsed_ms: int) -> Prefetch:
        return cls(rendered="", degradations=(why,), entry_count=0, elapsed_ms=elapsed_ms)


def render_prefetch(sections: Sequence[Section]) -> str:
    """``[SUGGESTED CONTEXT]`` and each section's entries, in the fixed order of HEADINGS."""
    found = {section.name: section for section in sections if section.hits}
    if not found:
        return ""
    lines = ["[SUGGESTED CONTEXT]"]
    for name, heading in HEADINGS.items():
        if name not in found:
            continue
        lines.append(heading)
        for hit in found[name].hits:
            text = " ".join(hit.chunk.content.split())
            lines.append(f"- {text} (document_id={hit.chunk.document_id})")
    return "\n".join(lines) + "\n"
