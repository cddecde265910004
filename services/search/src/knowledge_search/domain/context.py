"""Provenance-carrying context: facts that rest on evidence, the evidence, and the rendered block.

A fact carries evidence ids of this context, or its status is UNRESOLVED: there is no third
state. ``fact`` is the one place a fact is made, and ``KnowledgeContext`` refuses to exist
with a fact that breaks the rule (``facts_without_provenance``), whatever path produced it.

Statements come from the synthesis, sentence by sentence. The extractive synthesiser quotes
sources verbatim, so its statements are SUPPORTED; a language model states each statement's
level as a leading ``SUPPORTED:``, ``PARTIAL:`` or ``UNKNOWN:`` (``GRADING_INSTRUCTION``), and
a level it invents, or leaves out, becomes UNKNOWN.

``render`` is byte-stable: it reads only the retrieval's ordered results and the synthesis
(no clock, no row order), and formats numbers with a fixed precision.
"""

from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from knowledge_search.domain.model import Relevance, SearchHit
from knowledge_search.domain.relevance import BANNER_TEXT

GRADING_INSTRUCTION = (
    "Begin every statement with its support level and a colon: SUPPORTED: when a source states it, "
    "PARTIAL: when a source states only part of it, UNKNOWN: otherwise."
)
_MARKERS = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")
# A statement ends at . ! ? (its markers may follow), or after markers before a capital letter.
_STATEMENT_END = re.compile(r"(?<=[.!?])\s+(?!\[\d)|(?<=\])\s+(?=[A-Z])|\n+")
_LEVEL = re.compile(r"^\s*([A-Za-z_]+)\s*:\s*")


class Support(enum.Enum):
    SUPPORTED = "SUPPORTED"
    PARTIAL = "PARTIAL"
    UNKNOWN = "UNKNOWN"


class FactStatus(enum.Enum):
    GROUNDED = "GROUNDED"
    UNRESOLVED = "UNRESOLVED"


# How much a support level keeps of its best evidence's similarity as confidence.
_CONFIDENCE_SHARE = {Support.SUPPORTED: 1.0, Support.PARTIAL: 0.6, Support.UNKNOWN: 0.3}


@dataclass(frozen=True, slots=True)
class Evidence:
    evidence_id: str
    hit: SearchHit
    excerpt: str
    excerpt_sha256: str
    extractor: str = ""  # what read the document's text (documents.extractor); empty when it records none


@dataclass(frozen=True, slots=True)
class Fact:
    statement: str
    support: Support
    confidence: float
    evidence_ids: tuple[str, ...]
    status: FactStatus


def evidence_of(hits: Sequence[SearchHit]) -> tuple[Evidence, ...]:
    """One entry per retrieved chunk, in retrieval order: E1 is the first result."""
    return tuple(
        Evidence(
            evidence_id=f"E{n}",
            hit=hit,
            excerpt=hit.chunk.content,
            excerpt_sha256=hashlib.sha256(hit.chunk.content.encode("utf-8")).hexdigest(),
            extractor=hit.chunk.extractor,
        )
        for n, hit in enumerate(hits, start=1)
    )


def fact(statement: str, support: Support, evidence: Sequence[Evidence]) -> Fact:
    """The only maker of facts: without evidence a statement is UNRESOLVED (UNKNOWN, confidence 0)."""
    if not evidence:
        return Fact(statement, Support.UNKNOWN, 0.0, (), FactStatus.UNRESOLVED)
    best = max(e.hit.score for e in evidence)
    confidence = round(min(1.0, max(0.0, best)) * _CONFIDENCE_SHARE[support], 4)
    return Fact(statement, support, confidence, tuple(e.evidence_id for e in evidence), FactStatus.GROUNDED)


def support_level(label: str | None, *, default: Support) -> Support:
    """A model's label as a level; one it invented becomes UNKNOWN, never a stronger level."""
    if label is None:
        return default
    try:
        return Support(label.upper())
    except ValueError:
        return Support.UNKNOWN


def facts_from(text: str, evidence: Sequence[Evidence], *, graded: bool) -> tuple[Fact, ...]:
    """The synthesis's statements as facts; ``[n]`` names evidence n (markers beyond it are dropped).

    ``graded``: the synthesis was asked for levels (a model), so an unlabelled statement is
    UNKNOWN; otherwise (the extractive quotes) it is SUPPORTED.
    """
    facts: list[Fact] = []
    for raw in _STATEMENT_END.split(text):
        cited: list[Evidence] = []
        for group in _MARKERS.findall(raw):
            for part in group.split(","):
                number = int(part)
                if 1 <= number <= len(evidence) and evidence[number - 1] not in cited:
                    cited.append(evidence[number - 1])
        statement = " ".join(_MARKERS.sub(" ", raw).split())
        statement = re.sub(r"\s+([.,;:!?])", r"\1", statement)
        label = None
        match = _LEVEL.match(statement)
        if match and graded:
            label, statement = match.group(1), statement[match.end() :]
        if not statement.strip(" .,;:"):
            continue
        default = Support.UNKNOWN if graded else Support.SUPPORTED
        facts.append(fact(statement, support_level(label, default=default), cited))
    return tuple(facts)


def facts_without_provenance(facts: Sequence[Fact], evidence: Sequence[Evidence]) -> list[Fact]:
    """Facts that break the rule: grounded without evidence of this context, or unresolved with some."""
    known = {e.evidence_id for e in evidence}
    return [
        f
        for f in facts
        if (f.status is FactStatus.GROUNDED and (not f.evidence_ids or not set(f.evidence_ids) <= known))
        or (f.status is FactStatus.UNRESOLVED and f.evidence_ids)
    ]


@dataclass(frozen=True, slots=True)
class ContextMetadata:
    query: str
    scope: str
    backend: str
    elapsed_ms: int
    truncated: bool
    degradations: tuple[str, ...]
    relevance: Relevance


@dataclass(frozen=True, slots=True)
class KnowledgeContext:
    facts: tuple[Fact, ...]
    evidence: tuple[Evidence, ...]
    metadata: ContextMetadata
    rendered: str

    def __post_init__(self) -> None:
        broken = facts_without_provenance(self.facts, self.evidence)
        if broken:
            raise ValueError(f"{len(broken)} fact(s) without provenance")

    @property
    def unresolved_count(self) -> int:
        return sum(1 for f in self.facts if f.status is FactStatus.UNRESOLVED)


def _where(hit: SearchHit) -> str:
    chunk = hit.chunk
    parts = [chunk.filename or f"document {chunk.document_id}"]
    if chunk.section:
        parts.append(f"section {chunk.section!r}")
    if chunk.page:
        parts.append(f"page {chunk.page}")
    if chunk.source_url:
        parts.append(chunk.source_url)
    return ", ".join(parts)


def render(
    query: str,
    relevance: Relevance,
    facts: Sequence[Fact],
    evidence: Sequence[Evidence],
    degradations: Sequence[str] = (),
) -> str:
    """The block a model is given: labelled prose with explicit support levels, then the evidence."""
    lines = ["[KNOWLEDGE CONTEXT]", f"Query: {' '.join(query.split())}", BANNER_TEXT[relevance]]
    lines.extend(f"Degraded: {why}" for why in degradations)
    lines += ["", "Facts:"]
    if not facts:
        lines.append("(none: the documents hold nothing to state about this)")
    for n, f in enumerate(facts, start=1):
        if f.status is FactStatus.UNRESOLVED:
            lines.append(f"{n}. [UNRESOLVED - no evidence; do not rely on it] {f.statement}")
        else:
            cited = ", ".join(f.evidence_ids)
            lines.append(f"{n}. [{f.support.value}, confidence {f.confidence:.2f}] {f.statement} (evidence: {cited})")
    lines += ["", "Evidence:"]
    if not evidence:
        lines.append("(none)")
    for e in evidence:
        chunk = e.hit.chunk
        ref = f"document_ref={chunk.document_ref}{chunk.fragment}, " if chunk.document_ref else ""
        lines.append(
            f"[{e.evidence_id}] {_where(e.hit)} ({ref}document_id={chunk.document_id}, chunk_id={chunk.chunk_id}, "
            f"sha256={e.excerpt_sha256})"
        )
        lines.append(e.excerpt)
    return "\n".join(lines) + "\n"
