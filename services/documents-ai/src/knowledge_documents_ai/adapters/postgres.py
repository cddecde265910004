"""Document AI's tables in PostgreSQL (role knowledge_documents_ai, migration 0045): the taxonomy,
the schemas and the processing results it writes; the documents and chunks it only reads, within
the caller's reach (runtime ``db.reach``); and the cost ledger every LLM call is recorded in."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import asyncpg
from knowledge_runtime.auth import Scope
from knowledge_runtime.costs import RECORD_COST, Cost, CostItem, cost_record
from knowledge_runtime.db.pool import Database
from knowledge_runtime.db.reach import PostgresReach, principals_arg, readable_by
from knowledge_runtime.refusals import Refusal, Refused

from knowledge_documents_ai.domain.errors import DocumentHasNoText, DocumentNotFound, TaxonomyInvalid, TypeExists
from knowledge_documents_ai.domain.evidence import SourceChunk
from knowledge_documents_ai.domain.model import ProcessingResult, StoredSchema, StoredType, Timings
from knowledge_documents_ai.domain.processing import DocumentContent
from knowledge_documents_ai.domain.taxonomy import DocumentType, ExtractionSchema, described_schema

_TYPE_COLUMNS = """
t.name, t.description, t.examples, t.added_by, t.add_time, t.reason, t.origin, t.proposed_for,
t.retire_time IS NOT NULL AS retired,
coalesce((SELECT max(s.version) FROM extraction_schemas s WHERE s.tenant_id = t.tenant_id AND s.type_name = t.name), 0)
    AS schema_version
"""
TYPES = f"""
SELECT {_TYPE_COLUMNS} FROM document_types t
WHERE t.tenant_id = $1 AND ($2 OR t.retire_time IS NULL)
ORDER BY t.name
"""
TYPE = f"SELECT {_TYPE_COLUMNS} FROM document_types t WHERE t.tenant_id = $1 AND t.name = $2"
ADD_TYPE = """
INSERT INTO document_types (tenant_id, name, description, examples, added_by, reason, origin, proposed_for)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (tenant_id, name) DO NOTHING
RETURNING name
"""
SET_RETIRED = """
UPDATE document_types SET retire_time = CASE WHEN $3 THEN coalesce(retire_time, now()) END,
                          retired_by = CASE WHEN $3 THEN $4 END
WHERE tenant_id = $1 AND name = $2
RETURNING name
"""
SCHEMAS = """
SELECT type_name, version, json_schema::text AS json_schema, added_by, add_time, origin
FROM extraction_schemas WHERE tenant_id = $1 AND type_name = $2 ORDER BY version DESC
"""
# Serialised per type by the type's row lock, so two writers cannot take the same version.
LOCK_TYPE = "SELECT 1 FROM document_types WHERE tenant_id = $1 AND name = $2 FOR UPDATE"
ADD_SCHEMA = """
INSERT INTO extraction_schemas (tenant_id, type_name, version, json_schema, added_by, origin)
SELECT $1, $2, coalesce(max(version), 0) + 1, $3::jsonb, $4, $5
FROM extraction_schemas WHERE tenant_id = $1 AND type_name = $2
RETURNING type_name, version, json_schema::text AS json_schema, added_by, add_time, origin
"""
# A deleted document (deleted_at set, its removal pending) is gone here as for ingest and search;
# so is one whose access list does not admit the caller's principals ($3).
DOCUMENT = f"""
SELECT state FROM documents
WHERE document_id = $1 AND corpus_id = ANY($2::bigint[]) AND deleted_at IS NULL AND {readable_by("principals", "$3")}
"""
CHUNKS = """
SELECT chunk_id, content, page, section FROM chunks WHERE document_id = $1 ORDER BY chunk_index
"""
_RESULT_COLUMNS = """
result_id, document_id, content_hash, type_name, confidence, proposed_type, schema_version,
outcome::text AS outcome, cost::text AS cost, timings::text AS timings, run_by, model, create_time
"""
FIND_RESULT = f"""
SELECT {_RESULT_COLUMNS} FROM processing_results
WHERE tenant_id = $1 AND document_id = $2 AND content_hash = $3 AND type_name = $4 AND schema_version = $5
"""
ADD_RESULT = f"""
INSERT INTO processing_results (tenant_id, document_id, content_hash, type_name, confidence, proposed_type,
                                schema_version, outcome, cost, timings, run_by, model)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9::jsonb, $10::jsonb, $11, $12)
ON CONFLICT (tenant_id, document_id, content_hash, type_name, schema_version) DO NOTHING
RETURNING {_RESULT_COLUMNS}
"""
RESULTS = f"""
SELECT {_RESULT_COLUMNS} FROM processing_results
WHERE tenant_id = $1 AND document_id = $2 AND ($3::bigint IS NULL OR result_id < $3)
ORDER BY result_id DESC LIMIT $4
"""
_INGESTING = {"QUEUED", "EXTRACTING", "CHUNKING", "EMBEDDING", "STORING"}


def _stored_type(row: asyncpg.Record) -> StoredType:
    kind = DocumentType(
        name=row["name"],
        description=row["description"],
        examples=tuple(row["examples"]),
        added_by=row["added_by"],
        added_at=row["add_time"],
        reason=row["reason"],
    )
    return StoredType(kind, row["origin"], row["proposed_for"], row["retired"], row["schema_version"])


def _stored_schema(row: asyncpg.Record) -> StoredSchema:
    data = json.loads(row["json_schema"])
    try:
        schema = described_schema(row["type_name"], row["version"], data)
    except TaxonomyInvalid:  # validated when stored; a rule tightened since keeps the stored schema readable
        schema = ExtractionSchema(row["type_name"], row["version"], data)
    return StoredSchema(schema, row["added_by"], row["add_time"], row["origin"])


class PostgresTaxonomy:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def types(self, tenant: str, *, include_retired: bool = False) -> list[StoredType]:
        return [_stored_type(r) for r in await self._db.fetch("document_types", TYPES, tenant, include_retired)]

    async def get_type(self, tenant: str, name: str) -> StoredType | None:
        row = await self._db.fetchrow("document_type", TYPE, tenant, name)
        return _stored_type(row) if row is not None else None

    async def add_type(
        self, tenant: str, kind: DocumentType, *, origin: str, proposed_for: int | None = None
    ) -> StoredType:
        added = await self._db.fetchval(
            "add_document_type",
            ADD_TYPE,
            tenant,
            kind.name,
            kind.description,
            list(kind.examples),
            kind.added_by,
            kind.reason,
            origin,
            proposed_for,
        )
        if added is None:
            raise TypeExists(kind.name)
        stored = await self.get_type(tenant, kind.name)
        assert stored is not None  # just written; types are never deleted
        return stored

    async def set_retired(self, tenant: str, name: str, retired: bool, by: str) -> StoredType | None:
        if await self._db.fetchval("retire_document_type", SET_RETIRED, tenant, name, retired, by) is None:
            return None
        return await self.get_type(tenant, name)

    async def schemas(self, tenant: str, type_name: str) -> list[StoredSchema]:
        return [_stored_schema(r) for r in await self._db.fetch("extraction_schemas", SCHEMAS, tenant, type_name)]

    async def add_schema(
        self, tenant: str, type_name: str, json_schema: Mapping[str, Any], *, added_by: str, origin: str
    ) -> StoredSchema:
        async with self._db.transaction() as tx:
            await tx.fetchval("lock_document_type", LOCK_TYPE, tenant, type_name)
            row = await tx.fetchrow(
                "add_extraction_schema", ADD_SCHEMA, tenant, type_name, json.dumps(json_schema), added_by, origin
            )
        assert row is not None
        return _stored_schema(row)


class PostgresDocuments:
    """A document's chunks when the caller may read it: its corpus within the caller's reach, and
    its access list admitting the caller."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._reach = PostgresReach(db)

    async def visible(self, scope: Scope, document_id: int) -> None:
        await self._state(scope, document_id)

    async def content(self, scope: Scope, document_id: int) -> DocumentContent:
        state = await self._state(scope, document_id)
        if state in _INGESTING:
            raise Refused(Refusal.INDEXING, "the document is still being ingested; try again when it is searchable")
        rows = await self._db.fetch("document_chunks", CHUNKS, document_id)
        if not rows:
            raise DocumentHasNoText()
        return DocumentContent(
            document_id,
            tuple(SourceChunk(r["chunk_id"], r["content"], r["page"], r["section"]) for r in rows),
        )

    async def _state(self, scope: Scope, document_id: int) -> str:
        """The document's ingest state, or DocumentNotFound outside the caller's reach or its list."""
        reach = await self._reach.reach_of(scope)
        state = await self._db.fetchval(
            "document_state", DOCUMENT, document_id, sorted(reach.corpus_ids), principals_arg(reach.reader.principals)
        )
        if state is None:
            raise DocumentNotFound(str(document_id))
        return str(state)


def _cost_json(cost: Cost) -> str:
    return json.dumps(
        {
            "currency": cost.currency,
            "items": [
                {
                    "model_id": i.model_id,
                    "operation": i.operation,
                    "texts": i.texts,
                    "input_tokens": i.input_tokens,
                    "output_tokens": i.output_tokens,
                    "amount": i.amount,
                }
                for i in cost.items
            ],
        }
    )


def _result(row: asyncpg.Record) -> ProcessingResult:
    outcome = json.loads(row["outcome"])
    cost = json.loads(row["cost"])
    timings = json.loads(row["timings"])
    return ProcessingResult(
        document_id=row["document_id"],
        content_hash=row["content_hash"],
        type_name=row["type_name"],
        confidence=row["confidence"],
        proposed_type=row["proposed_type"],
        schema_version=row["schema_version"],
        outcome=outcome,
        cost=Cost(tuple(CostItem(**item) for item in cost.get("items", ())), cost.get("currency", "USD")),
        timings=Timings(**timings),
        run_by=row["run_by"],
        model=row["model"],
        result_id=row["result_id"],
        create_time=row["create_time"],
        notes=tuple(outcome.get("notes", ())),
    )


class PostgresResults:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def find(
        self, tenant: str, document_id: int, content_hash: str, type_name: str, schema_version: int
    ) -> ProcessingResult | None:
        row = await self._db.fetchrow(
            "find_processing_result", FIND_RESULT, tenant, document_id, content_hash, type_name, schema_version
        )
        return _result(row) if row is not None else None

    async def add(self, tenant: str, result: ProcessingResult) -> tuple[ProcessingResult, bool]:
        timings = result.timings
        row = await self._db.fetchrow(
            "add_processing_result",
            ADD_RESULT,
            tenant,
            result.document_id,
            result.content_hash,
            result.type_name,
            result.confidence,
            result.proposed_type,
            result.schema_version,
            json.dumps(result.outcome),
            _cost_json(result.cost),
            json.dumps(
                {
                    "classify_ms": timings.classify_ms,
                    "taxonomy_ms": timings.taxonomy_ms,
                    "extract_ms": timings.extract_ms,
                }
            ),
            result.run_by,
            result.model,
        )
        if row is not None:
            return _result(row), False
        existing = await self.find(
            tenant, result.document_id, result.content_hash, result.type_name, result.schema_version
        )
        assert existing is not None  # the conflicting row; results are never deleted but with their document
        return existing, True

    async def page(self, tenant: str, document_id: int, after_id: int | None, limit: int) -> list[ProcessingResult]:
        rows = await self._db.fetch("processing_results", RESULTS, tenant, document_id, after_id, limit)
        return [_result(r) for r in rows]


class PostgresCostLedger:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def record(self, tenant: str, item: CostItem) -> None:
        await self._db.execute("record_cost", RECORD_COST, *cost_record(tenant, item))
