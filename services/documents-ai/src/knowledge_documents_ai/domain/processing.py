"""The pure decisions of processing a document: what it is made of, how its chunks' scores
become the document's, when to propose a type, what a model's proposal or generated schema
must be to be accepted, and the cards a result is shown as.

A document's similarity to a type is the mean of its best ``EVIDENCE_CHUNKS`` chunk scores for
that type: one chunk (a cover page, a signature block) cannot type a document alone, and a long
document is not diluted by its many ordinary chunks. Those chunks are the evidence.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from knowledge_documents_ai.domain.classification import EVIDENCE_CHUNKS, Calibration, Classification
from knowledge_documents_ai.domain.errors import TaxonomyInvalid
from knowledge_documents_ai.domain.evidence import Checked, SourceChunk
from knowledge_documents_ai.domain.extraction import strip_fence
from knowledge_documents_ai.domain.limits import MAX_SCHEMA_CHARS, UNCLASSIFIED
from knowledge_documents_ai.domain.tables import ExtractedTable
from knowledge_documents_ai.domain.taxonomy import (
    DocumentType,
    ExtractionSchema,
    document_type,
    extraction_schema,
)
from knowledge_documents_ai.domain.validation import TooDeep, loads

DEFAULT_PROPOSAL_THRESHOLD = 0.5  # below this confidence, processing proposes a type
DEFAULT_PROMPT_CHARS = 6_000  # the document text one model prompt carries
CLASSIFY_CHUNKS = 8  # the chunks a classification reads (the first ones)


@dataclass(frozen=True, slots=True)
class Tuning:
    """What a deployment may tune (KNOWLEDGE_DOCAI_*); each default is the constant above."""

    calibration: Calibration = Calibration()
    proposal_threshold: float = DEFAULT_PROPOSAL_THRESHOLD
    prompt_chars: int = DEFAULT_PROMPT_CHARS
    classify_chunks: int = CLASSIFY_CHUNKS


@dataclass(frozen=True, slots=True)
class DocumentContent:
    document_id: int
    chunks: tuple[SourceChunk, ...]  # in document order
    content_hash: str = field(init=False)  # of the chunks, computed once

    def __post_init__(self) -> None:
        object.__setattr__(self, "content_hash", content_hash(c.content for c in self.chunks))


def content_hash(texts: Any) -> str:
    """SHA-256 of the chunk texts in order, each length-prefixed (so a boundary cannot move)."""
    digest = hashlib.sha256()
    for text in texts:
        data = text.encode("utf-8")
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()


def prompt_chunks(chunks: Sequence[SourceChunk], max_chars: int = DEFAULT_PROMPT_CHARS) -> tuple[SourceChunk, ...]:
    """The leading chunks that fit ``max_chars`` (always at least the first)."""
    picked: list[SourceChunk] = []
    used = 0
    for chunk in chunks:
        if picked and used + len(chunk.content) > max_chars:
            break
        picked.append(chunk)
        used += len(chunk.content)
    return tuple(picked)


def document_scores(
    chunk_scores: Mapping[int, Mapping[str, float]], types: Sequence[str]
) -> tuple[dict[str, float], dict[str, list[tuple[int, float]]]]:
    """Per type: the document's similarity (mean of its best chunks' scores, a chunk that did
    not score the type counting 0) and every chunk's (chunk_id, score) for the evidence."""
    similarities: dict[str, float] = {}
    per_chunk: dict[str, list[tuple[int, float]]] = {}
    for name in types:
        pairs = [(chunk_id, float(scores.get(name, 0.0))) for chunk_id, scores in chunk_scores.items()]
        per_chunk[name] = pairs
        best = sorted((score for _, score in pairs), reverse=True)[:EVIDENCE_CHUNKS]
        similarities[name] = sum(best) / len(best) if best else 0.0
    return similarities, per_chunk


def needs_proposal(classification: Classification, threshold: float = DEFAULT_PROPOSAL_THRESHOLD) -> bool:
    return not classification.classified or classification.confidence < threshold


def excerpt(chunks: Sequence[SourceChunk], max_chars: int = DEFAULT_PROMPT_CHARS) -> str:
    return "\n\n".join(c.content for c in prompt_chunks(chunks, max_chars))[:max_chars]


def proposal_messages(existing: Sequence[DocumentType], text: str, problem: str = "") -> list[dict[str, str]]:
    listed = "\n".join(f"- {t.name}: {t.description}" for t in existing) or "(none yet)"
    system = (
        "You name kinds of documents. Answer only JSON: "
        '{"name": NAME, "description": ONE SENTENCE}. NAME is lowercase letters, digits and "_" '
        '(e.g. "purchase_order"), a kind of document, not a topic.'
    )
    user = f"Known types (none fits this document):\n{listed}\n\nDocument:\n{text}\n\nWhat type of document is this?"
    if problem:
        user += f"\n\nYour previous answer was refused: {problem}. Answer again."
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


@dataclass(frozen=True, slots=True)
class Proposal:
    kind: DocumentType | None = None
    problem: str = ""


def interpret_proposal(answer: str, **provenance: Any) -> Proposal:
    """A valid new type from the model's answer, or the problem to tell it."""
    try:
        data = loads(strip_fence(answer))
    except TooDeep as deep:
        return Proposal(problem=f"the answer is not acceptable JSON: {deep}")
    except ValueError:
        return Proposal(problem="the answer is not JSON")
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return Proposal(problem='the answer must be an object {"name": ..., "description": ...}')
    description = data.get("description")
    try:
        kind = document_type(
            data["name"].strip().lower(), description if isinstance(description, str) else "", **provenance
        )
    except TaxonomyInvalid as error:
        return Proposal(problem=f"{error.field}: {error.message}")
    return Proposal(kind=kind)


def schema_messages(kind: DocumentType, text: str, problem: str = "") -> list[dict[str, str]]:
    system = (
        "You design extraction schemas. Answer only a JSON Schema object: "
        '{"type": "object", "properties": {FIELD: {"type": "string"|"number"|"integer"|"boolean", '
        '"description": WHAT IT HOLDS}}, "required": [...]} with 3 to 10 fields a document of this '
        "kind states. Every property has a description. Field names are lowercase with '_'."
    )
    user = f"Document type: {kind.name}: {kind.description}\n\nAn example document:\n{text}"
    if problem:
        user += f"\n\nYour previous answer was refused: {problem}. Answer again."
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


@dataclass(frozen=True, slots=True)
class GeneratedSchema:
    schema: ExtractionSchema | None = None
    problem: str = ""


def interpret_schema(answer: str, type_name: str, version: int) -> GeneratedSchema:
    """The model's schema, checked as a person's is (CPU-bound: callers run it off the event loop)."""
    try:
        data = loads(strip_fence(answer))
    except TooDeep as deep:
        return GeneratedSchema(problem=f"the answer is not acceptable JSON: {deep}")
    except ValueError:
        return GeneratedSchema(problem="the answer is not JSON")
    if not isinstance(data, dict):
        return GeneratedSchema(problem="the answer must be a JSON Schema object")
    try:
        return GeneratedSchema(schema=extraction_schema(type_name, version, data))
    except TaxonomyInvalid as error:
        return GeneratedSchema(problem=error.message)


def schema_from_text(type_name: str, version: int, text: str) -> ExtractionSchema:
    """A caller's JSON Schema text as a valid schema, or TaxonomyInvalid (CPU-bound: callers run
    it off the event loop)."""
    return extraction_schema(type_name, version, parse_schema_text(text))


def parse_schema_text(text: str) -> dict[str, Any]:
    """A caller's JSON Schema text as an object, or TaxonomyInvalid."""
    if len(text) > MAX_SCHEMA_CHARS:
        raise TaxonomyInvalid("json_schema", f"a schema is at most {MAX_SCHEMA_CHARS} characters")
    try:
        data = loads(text)
    except TooDeep as deep:
        raise TaxonomyInvalid("json_schema", f"json_schema is refused: {deep}") from None
    except ValueError:
        raise TaxonomyInvalid("json_schema", "json_schema is not JSON text") from None
    if not isinstance(data, dict):
        raise TaxonomyInvalid("json_schema", "json_schema must be a JSON object")
    return data


# ---- cards: what an agent or a UI shows as is ----


@dataclass(frozen=True, slots=True)
class Card:
    kind: str
    title: str
    markdown: str


def classification_card(result: Classification) -> Card:
    if result.classified:
        title = f"Classified as {result.type_name} ({result.confidence:.0%}, by {result.decided_by})"
    else:
        title = f"No type fits ({UNCLASSIFIED}, {result.confidence:.0%})"
    lines = [f"**{title}**", ""]
    if result.alternatives:
        lines.append("| alternative | probability | similarity |")
        lines.append("|---|---|---|")
        lines.extend(f"| {c.type_name} | {c.probability:.1%} | {c.similarity:.3f} |" for c in result.alternatives)
    if result.evidence:
        lines.append("")
        lines.append("Evidence: " + ", ".join(f"chunk {e.chunk_id} ({e.similarity:.3f})" for e in result.evidence))
    return Card("classification_result", title, "\n".join(lines))


def extraction_card(
    tables: Sequence[ExtractedTable], checked: Checked | None, schema: ExtractionSchema | None = None
) -> Card:
    lines: list[str] = []
    if checked is not None and schema is not None:
        title = (
            f"{len(checked.values)} field(s) of {schema.type_name} v{schema.version}, {len(checked.dropped)} dropped"
        )
        lines.append(f"**{title}**")
        lines.append("")
        lines.append("| field | value | evidence |")
        lines.append("|---|---|---|")
        for value in checked.values:
            quote = value.evidence.quote.replace("|", "\\|").replace("\n", " ")
            shown = json.dumps(value.value, ensure_ascii=False).replace("|", "\\|")
            lines.append(f'| {value.field} | {shown} | chunk {value.evidence.chunk_id}: "{quote}" |')
        for dropped in checked.dropped:
            lines.append(f"| {dropped.field} | (dropped) | {dropped.why} |")
    else:
        title = f"{len(tables)} table(s)"
        lines.append(f"**{title}**")
        for table in tables:
            columns = ", ".join(f"{c.name} ({c.type})" for c in table.columns)
            lines.append(f"- {table.title or 'table'}: {table.row_count} row(s); {columns}")
    return Card("extraction_result", title, "\n".join(lines))
