"""The agent tool's text: the banner, the synthesis, then every retrieved chunk in full, never truncated."""

from __future__ import annotations

from collections.abc import Sequence

from knowledge_search.domain.model import Relevance, SearchHit
from knowledge_search.domain.relevance import BANNER_TEXT


def source_line(number: int, hit: SearchHit) -> str:
    vec = f"vec#{hit.vector_rank}" if hit.vector_rank else "vec#-"
    lex = f"lex#{hit.lexical_rank}" if hit.lexical_rank else "lex#-"
    percent = round(hit.score * 100)
    url = f", url={hit.chunk.source_url}" if hit.chunk.source_url else ""
    ref = f", document_ref={hit.chunk.document_ref}{hit.chunk.fragment}" if hit.chunk.document_ref else ""
    return f"[Source {number} (document_id={hit.chunk.document_id}{ref}{url}), relevance: {percent}%, {vec}/{lex}]"


SYNTHESIS_UNAVAILABLE = "Synthesis: unavailable ({why}); the sources follow."


def render(hits: Sequence[SearchHit], relevance: Relevance, synthesis: str = "", unavailable: str = "") -> str:
    """``synthesis`` cites the sources below by their numbers; ``unavailable`` says why there is none."""
    parts = [BANNER_TEXT[relevance]]
    if synthesis:
        parts.append(f"Synthesis: {synthesis}")
    elif unavailable:
        parts.append(SYNTHESIS_UNAVAILABLE.format(why=unavailable))
    for number, hit in enumerate(hits, start=1):
        parts.append(f"{source_line(number, hit)}\n{hit.chunk.content}")
    return "\n\n".join(parts) + "\n"
