"""What document AI stores and answers: stored types and schemas, costs, processing results."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from knowledge_runtime.costs import Cost

from knowledge_documents_ai.domain.classification import Classification
from knowledge_documents_ai.domain.evidence import Checked
from knowledge_documents_ai.domain.processing import Card
from knowledge_documents_ai.domain.tables import ExtractedTable
from knowledge_documents_ai.domain.taxonomy import DocumentType, ExtractionSchema

PERSON, PROPOSAL, GENERATED = "person", "proposal", "generated"


@dataclass(frozen=True, slots=True)
class StoredType:
    kind: DocumentType
    origin: str = PERSON
    proposed_for: int | None = None
    retired: bool = False
    schema_version: int = 0  # the newest schema's, 0 when none


@dataclass(frozen=True, slots=True)
class StoredSchema:
    schema: ExtractionSchema
    added_by: str = ""
    add_time: datetime | None = None
    origin: str = PERSON


@dataclass(frozen=True, slots=True)
class ClassifyOutcome:
    classification: Classification
    cost: Cost
    card: Card
    refused_llm_answer: str = ""
    chunk_places: Mapping[int, tuple[int | None, str]] = field(default_factory=dict)  # chunk -> (page, section)


@dataclass(frozen=True, slots=True)
class ExtractOutcome:
    tables: tuple[ExtractedTable, ...]
    checked: Checked | None  # None when schemaless
    schema: ExtractionSchema | None
    attempts: int
    cost: Cost
    card: Card


@dataclass(frozen=True, slots=True)
class Timings:
    classify_ms: int = 0
    taxonomy_ms: int = 0
    extract_ms: int = 0


@dataclass(frozen=True, slots=True)
class ProcessingResult:
    document_id: int
    content_hash: str
    type_name: str
    confidence: float
    proposed_type: bool
    schema_version: int
    outcome: dict[str, Any]  # {"fields", "dropped", "tables", "notes"}: JSON, as stored
    cost: Cost = Cost()
    timings: Timings = Timings()
    run_by: str = ""
    model: str = ""
    result_id: int = 0
    create_time: datetime | None = None
    notes: tuple[str, ...] = field(default=())
