"""Schema extraction by a model: the prompt it gets, and what is accepted of its answer.

The model answers JSON ``{"values": [{"field", "value", "chunk_id", "quote"}, ...]}``. The
values, as an object, must validate against the schema (JSON Schema draft 2020-12, by the
``jsonschema`` library under :mod:`.validation`'s bounds); an answer that does not parse or does not validate is asked for again
up to ``MAX_ATTEMPTS`` times, each retry told what was wrong, then refused. A valid answer's
values then pass the evidence check (:mod:`.evidence`): what has no evidence is dropped and
reported, never kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from knowledge_documents_ai.domain.errors import ExtractionInvalid
from knowledge_documents_ai.domain.evidence import SourceChunk
from knowledge_documents_ai.domain.taxonomy import ExtractionSchema
from knowledge_documents_ai.domain.validation import TooDeep, TooSlow, Unusable, clipped, instance_errors, loads

MAX_ATTEMPTS = 3
MAX_PROBLEMS_SHOWN = 5


@dataclass(frozen=True, slots=True)
class Interpretation:
    claims: tuple[Mapping[str, Any], ...] = ()
    problem: str = ""  # empty when the answer is acceptable

    @property
    def acceptable(self) -> bool:
        return not self.problem


def interpret(answer: str, schema: ExtractionSchema) -> Interpretation:
    """The model's claims, or the problem to tell it on the next attempt. A schema that cannot
    be applied, or whose check runs past its time, is refused (``ExtractionInvalid``): asking the
    model again would not help. CPU-bound: callers run it off the event loop."""
    try:
        data = loads(strip_fence(answer))
    except TooDeep as deep:
        return Interpretation(problem=f"the answer is not acceptable JSON: {deep}")
    except ValueError:
        return Interpretation(problem="the answer is not JSON")
    values = data.get("values") if isinstance(data, dict) else None
    if not isinstance(values, list) or not all(isinstance(v, dict) for v in values):
        return Interpretation(problem='the answer must be an object {"values": [...]} of objects')
    known = {f.name for f in schema.fields}
    unknown = sorted({str(v.get("field")) for v in values} - known)
    if unknown:
        return Interpretation(problem=f"fields not in the schema: {', '.join(unknown[:MAX_PROBLEMS_SHOWN])}")
    instance: dict[str, Any] = {}
    for claim in values:
        instance[str(claim["field"])] = claim.get("value")
    try:
        errors = instance_errors(schema.json_schema, instance)
    except (TooSlow, Unusable) as refusal:
        raise ExtractionInvalid(
            "schema_name", f"{schema.type_name} v{schema.version} cannot be applied to the answer: {refusal}"
        ) from None
    if errors:
        shown = "; ".join(_describe(e) for e in errors[:MAX_PROBLEMS_SHOWN])
        return Interpretation(problem=f"the values do not match the schema: {shown}")
    return Interpretation(claims=tuple(values))


def _describe(error: Any) -> str:
    where = "/".join(str(p) for p in error.path) or "(the object)"
    return f"{where}: {clipped(error.message)}"


def strip_fence(answer: str) -> str:
    """Models often wrap JSON in a markdown code fence; the JSON inside is the answer."""
    text = answer.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        if text.rstrip().endswith("```"):
            text = text.rstrip()[:-3]
    return text.strip()


def extraction_messages(
    schema: ExtractionSchema, chunks: Sequence[SourceChunk], problem: str = ""
) -> list[dict[str, str]]:
    """Chat messages asking for the schema's fields from ``chunks`` (a retry says what was wrong)."""
    fields = "\n".join(
        f"- {f.name}{' (required)' if f.required else ''}{f' [{f.json_type}]' if f.json_type else ''}: {f.description}"
        for f in schema.fields
    )
    sources = "\n\n".join(f"[chunk_id={c.chunk_id}]\n{c.content}" for c in chunks)
    system = (
        "You extract fields from a document. Answer only JSON: "
        '{"values": [{"field": NAME, "value": VALUE, "chunk_id": ID, "quote": EXACT TEXT}]}. '
        "Every value cites the chunk_id it comes from and quotes the exact text that states it. "
        "Leave out a field the document does not state; never guess."
    )
    user = f"Fields:\n{fields}\n\nDocument chunks:\n{sources}"
    if problem:
        user += f"\n\nYour previous answer was refused: {problem}. Answer again."
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def classification_messages(candidates: Sequence[tuple[str, str]], excerpt: str) -> list[dict[str, str]]:
    """Chat messages asking a model to choose one of ``candidates`` ((name, description) pairs)."""
    listed = "\n".join(f"- {name}: {description}" for name, description in candidates)
    system = "You classify documents. Answer with exactly one of the type names given, nothing else."
    user = f"Types:\n{listed}\n\nDocument:\n{excerpt}\n\nWhich type is this document?"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
