"""A tenant's taxonomy: document types and the versioned extraction schemas of each.

A type is embedded as an anchor (entity type ``document_type``) from the text
:func:`anchor_text` builds, so classification needs no LLM. A schema is a JSON Schema of an
object whose every property has a description (what a model, or a person, fills it with);
its version grows by one on every change and old versions are kept, so a processing result
names the exact schema it was extracted with.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from knowledge_documents_ai.domain.errors import TaxonomyInvalid
from knowledge_documents_ai.domain.limits import (
    MAX_DESCRIPTION_CHARS,
    MAX_EXAMPLE_CHARS,
    MAX_EXAMPLES,
    MAX_NAME_CHARS,
    TYPE_NAME_PATTERN,
    UNCLASSIFIED,
)
from knowledge_documents_ai.domain.validation import schema_problem

ANCHOR_ENTITY_TYPE = "document_type"
MAX_FIELDS = 100

_NAME = re.compile(TYPE_NAME_PATTERN)


@dataclass(frozen=True, slots=True)
class DocumentType:
    name: str
    description: str
    examples: tuple[str, ...] = ()
    added_by: str = ""
    added_at: datetime | None = None
    reason: str = ""  # why it was added (a person's note, or "proposed for document 42")


@dataclass(frozen=True, slots=True)
class SchemaField:
    name: str
    description: str
    json_type: str  # "string", "number", ... or "" when the schema does not say
    required: bool


@dataclass(frozen=True, slots=True)
class ExtractionSchema:
    type_name: str
    version: int
    json_schema: Mapping[str, Any]
    fields: tuple[SchemaField, ...] = field(default=())


def document_type(name: str, description: str, examples: Sequence[str] = (), **provenance: Any) -> DocumentType:
    """A valid type, or :class:`TaxonomyInvalid` naming the field that is not."""
    name = name.strip()
    if not _NAME.match(name) or len(name) > MAX_NAME_CHARS:
        raise TaxonomyInvalid(
            "name",
            f"a document type's name is lowercase letters, digits and '_', starting with a letter, "
            f"at most {MAX_NAME_CHARS} characters (e.g. 'invoice')",
        )
    if name == UNCLASSIFIED:
        raise TaxonomyInvalid("name", f"{UNCLASSIFIED!r} is reserved for documents no type fits")
    description = description.strip()
    if not description or len(description) > MAX_DESCRIPTION_CHARS:
        raise TaxonomyInvalid("description", f"a description of 1 to {MAX_DESCRIPTION_CHARS} characters is required")
    cleaned = tuple(e.strip() for e in examples if e.strip())
    if len(cleaned) > MAX_EXAMPLES or any(len(e) > MAX_EXAMPLE_CHARS for e in cleaned):
        raise TaxonomyInvalid(
            "examples", f"at most {MAX_EXAMPLES} examples of at most {MAX_EXAMPLE_CHARS} characters each"
        )
    if len(str(provenance.get("reason", ""))) > MAX_DESCRIPTION_CHARS:
        raise TaxonomyInvalid("reason", f"a reason of at most {MAX_DESCRIPTION_CHARS} characters")
    return DocumentType(name=name, description=description, examples=cleaned, **provenance)


def anchor_text(kind: DocumentType) -> str:
    """What the type's anchor embeds: its name in words, its description, then its examples."""
    parts = [kind.name.replace("_", " "), kind.description, *kind.examples]
    return "\n".join(parts)


def extraction_schema(type_name: str, version: int, json_schema: Mapping[str, Any]) -> ExtractionSchema:
    """A valid schema, or :class:`TaxonomyInvalid`: a JSON Schema (draft 2020-12) this service can
    apply (:mod:`.validation`; callers run it off the event loop) of an object with 1..100
    described properties."""
    problem = schema_problem(json_schema)
    if problem:
        raise TaxonomyInvalid("json_schema", problem)
    return described_schema(type_name, version, json_schema)


def described_schema(type_name: str, version: int, json_schema: Mapping[str, Any]) -> ExtractionSchema:
    """The schema's fields, or :class:`TaxonomyInvalid` when it is not an object of 1..100
    described properties; the JSON Schema itself is not checked (a stored schema was, once)."""
    if json_schema.get("type") != "object" or not isinstance(json_schema.get("properties"), Mapping):
        raise TaxonomyInvalid("json_schema", 'an extraction schema is an object schema with "properties"')
    properties: Mapping[str, Any] = json_schema["properties"]
    if not 1 <= len(properties) <= MAX_FIELDS:
        raise TaxonomyInvalid("json_schema", f"an extraction schema has 1 to {MAX_FIELDS} properties")
    required = set(json_schema.get("required", ()))
    fields = []
    for name, spec in properties.items():
        description = spec.get("description", "").strip() if isinstance(spec, Mapping) else ""
        if not description:
            raise TaxonomyInvalid(
                "json_schema", f"property {name!r} has no description: say what it holds, the model reads it"
            )
        json_type = spec.get("type", "")
        fields.append(SchemaField(name, description, json_type if isinstance(json_type, str) else "", name in required))
    return ExtractionSchema(type_name=type_name, version=version, json_schema=json_schema, fields=tuple(fields))
