"""Domain values to knowledge.v1 messages of documents_ai.proto."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp
from knowledge.v1 import documents_ai_pb2
from knowledge_runtime.convert import cost

from knowledge_documents_ai.domain.classification import Classification
from knowledge_documents_ai.domain.evidence import Checked
from knowledge_documents_ai.domain.model import (
    ClassifyOutcome,
    ExtractOutcome,
    ProcessingResult,
    StoredSchema,
    StoredType,
)
from knowledge_documents_ai.domain.processing import Card
from knowledge_documents_ai.domain.tables import ExtractedTable
from knowledge_documents_ai.usecases import table_json


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def timestamp(value: datetime | None) -> Timestamp | None:
    if value is None:
        return None
    stamp = Timestamp()
    stamp.FromDatetime(value)
    return stamp


def document_type(stored: StoredType) -> documents_ai_pb2.DocumentType:
    kind = stored.kind
    return documents_ai_pb2.DocumentType(
        name=kind.name,
        description=kind.description,
        examples=list(kind.examples),
        added_by=kind.added_by,
        add_time=timestamp(kind.added_at),
        reason=kind.reason,
        origin=stored.origin,
        proposed_for_document_id=str(stored.proposed_for) if stored.proposed_for else "",
        retired=stored.retired,
        schema_version=stored.schema_version,
    )


def schema(stored: StoredSchema) -> documents_ai_pb2.ExtractionSchema:
    return documents_ai_pb2.ExtractionSchema(
        type_name=stored.schema.type_name,
        version=stored.schema.version,
        json_schema=_json(dict(stored.schema.json_schema)),
        added_by=stored.added_by,
        add_time=timestamp(stored.add_time),
        origin=stored.origin,
    )


def card(value: Card) -> documents_ai_pb2.Card:
    return documents_ai_pb2.Card(kind=value.kind, title=value.title, markdown=value.markdown)


def classification(result: Classification, pages: Mapping[int, tuple[int | None, str]] | None = None) -> dict[str, Any]:
    pages = pages or {}
    return {
        "type_name": result.type_name,
        "confidence": result.confidence,
        "alternatives": [
            documents_ai_pb2.TypeScore(type_name=c.type_name, probability=c.probability, similarity=c.similarity)
            for c in result.alternatives
        ],
        "evidence": [
            documents_ai_pb2.ChunkEvidence(
                chunk_id=str(e.chunk_id),
                similarity=e.similarity,
                page=pages.get(e.chunk_id, (None, ""))[0] or 0,
                section=pages.get(e.chunk_id, (None, ""))[1],
            )
            for e in result.evidence
        ],
        "decided_by": result.decided_by,
    }


def classify_response(outcome: ClassifyOutcome) -> documents_ai_pb2.ClassifyDocumentResponse:
    return documents_ai_pb2.ClassifyDocumentResponse(
        **classification(outcome.classification, outcome.chunk_places),
        refused_llm_answer=outcome.refused_llm_answer,
        cost=cost(outcome.cost),
        card=card(outcome.card),
    )


def table(value: ExtractedTable) -> documents_ai_pb2.ExtractedTable:
    data = table_json(value)
    return _table(data)


def _table(data: Mapping[str, Any]) -> documents_ai_pb2.ExtractedTable:
    return documents_ai_pb2.ExtractedTable(
        title=data["title"],
        columns=[documents_ai_pb2.TableColumn(**c) for c in data["columns"]],
        rows_json=[_json(row) for row in data["rows"]],
        row_count=data["row_count"],
        chunk_ids=[str(i) for i in data["chunk_ids"]],
    )


def _field(data: Mapping[str, Any]) -> documents_ai_pb2.ExtractedField:
    evidence = data["evidence"]
    return documents_ai_pb2.ExtractedField(
        name=data["name"],
        value_json=_json(data["value"]),
        evidence=documents_ai_pb2.ValueEvidence(
            chunk_id=str(evidence["chunk_id"]),
            quote=evidence["quote"],
            page=evidence.get("page") or 0,
            section=evidence.get("section") or "",
        ),
    )


def _dropped(data: Sequence[Mapping[str, Any]]) -> list[documents_ai_pb2.DroppedValue]:
    return [documents_ai_pb2.DroppedValue(name=d["name"], why=d["why"]) for d in data]


def fields_of(checked: Checked) -> list[dict[str, Any]]:
    return [
        {
            "name": v.field,
            "value": v.value,
            "evidence": {
                "chunk_id": v.evidence.chunk_id,
                "quote": v.evidence.quote,
                "page": v.evidence.page,
                "section": v.evidence.section,
            },
        }
        for v in checked.values
    ]


def extract_response(outcome: ExtractOutcome) -> documents_ai_pb2.ExtractDocumentResponse:
    checked = outcome.checked
    return documents_ai_pb2.ExtractDocumentResponse(
        tables=[table(t) for t in outcome.tables] if checked is None else [],
        fields=[_field(f) for f in fields_of(checked)] if checked is not None else [],
        dropped=_dropped([{"name": d.field, "why": d.why} for d in checked.dropped]) if checked is not None else [],
        schema_name=outcome.schema.type_name if outcome.schema is not None else "",
        schema_version=outcome.schema.version if outcome.schema is not None else 0,
        attempts=outcome.attempts,
        cost=cost(outcome.cost),
        card=card(outcome.card),
    )


def processing_result(result: ProcessingResult) -> documents_ai_pb2.ProcessingResult:
    outcome = result.outcome
    return documents_ai_pb2.ProcessingResult(
        result_id=str(result.result_id),
        document_id=str(result.document_id),
        content_hash=result.content_hash,
        type_name=result.type_name,
        confidence=result.confidence,
        proposed_type=result.proposed_type,
        schema_version=result.schema_version,
        fields=[_field(f) for f in outcome.get("fields", ())],
        dropped=_dropped(outcome.get("dropped", ())),
        tables=[_table(t) for t in outcome.get("tables", ())],
        cost=cost(result.cost),
        timings=documents_ai_pb2.ProcessingTimings(
            classify_ms=result.timings.classify_ms,
            taxonomy_ms=result.timings.taxonomy_ms,
            extract_ms=result.timings.extract_ms,
        ),
        run_by=result.run_by,
        model=result.model,
        create_time=timestamp(result.create_time),
        notes=list(result.notes),
    )
