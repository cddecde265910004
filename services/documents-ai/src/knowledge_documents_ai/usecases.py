"""Document AI's use cases: the taxonomy, classify, extract, process.

Each reads what the domain needs through the ports, lets the domain decide, and writes what it
decided. Every LLM call goes through :meth:`DocumentsAi._chat`, which records its cost in the
ledger; without a model the calls that need one refuse (``LlmNotConfigured``), while
classification by embedding and schemaless extraction still work. A use case that may call the
model first checks the tenant's monthly LLM budget (``Refused(BUDGET_EXHAUSTED)`` once spent).
Checking a schema, or an answer against one, runs on the ``CHECKS`` threads: it is CPU work
bounded in time (``domain.validation``); on the event loop it would hold every other tenant's
call, and on the default executor many at once would crowd out everything else that runs there.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from knowledge_runtime.auth import Scope
from knowledge_runtime.chunking import split_structural
from knowledge_runtime.costs import Cost, CostItem
from knowledge_runtime.llm import LlmNotConfigured

from knowledge_documents_ai.domain import classification as classifying
from knowledge_documents_ai.domain import extraction, processing
from knowledge_documents_ai.domain.errors import ExtractionInvalid, SchemaNotFound, TypeExists, TypeNotFound
from knowledge_documents_ai.domain.evidence import Checked, SourceChunk, checked
from knowledge_documents_ai.domain.limits import UNCLASSIFIED
from knowledge_documents_ai.domain.model import (
    GENERATED,
    PERSON,
    PROPOSAL,
    ClassifyOutcome,
    ExtractOutcome,
    ProcessingResult,
    StoredSchema,
    StoredType,
    Timings,
)
from knowledge_documents_ai.domain.ports import Anchors, ChatModel, CostLedger, Documents, LlmBudget, Results, Taxonomy
from knowledge_documents_ai.domain.processing import DocumentContent, Tuning
from knowledge_documents_ai.domain.tables import ExtractedTable, extract_tables
from knowledge_documents_ai.domain.taxonomy import DocumentType, ExtractionSchema, document_type

T = TypeVar("T")

ANCHOR_TOP_K = 100  # SearchAnchors' maximum: every type of a taxonomy up to that size scores
UNCLASSIFIED_DESCRIPTION = "none of these types fits the document"
SERVICE_SUBJECT = "documents-ai"  # who added a generated schema
# Where schemas and answers are checked: two at a time, whoever asks; the rest wait their turn.
CHECKS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="schema-checks")


async def _checked(check: Callable[..., T], *args: Any) -> T:
    return await asyncio.get_running_loop().run_in_executor(CHECKS, check, *args)


class DocumentsAi:
    def __init__(
        self,
        taxonomy: Taxonomy,
        documents: Documents,
        anchors: Anchors,
        results: Results,
        ledger: CostLedger,
        llm: ChatModel | None = None,
        tuning: Tuning | None = None,
        clock: Callable[[], float] = time.monotonic,
        budget: LlmBudget | None = None,
    ) -> None:
        self._taxonomy = taxonomy
        self._documents = documents
        self._anchors = anchors
        self._results = results
        self._ledger = ledger
        self._llm = llm
        self._tuning = tuning or Tuning()
        self._clock = clock
        self._budget = budget

    # ---- the taxonomy ----

    async def create_type(
        self, scope: Scope, name: str, description: str, examples: Sequence[str], reason: str
    ) -> StoredType:
        kind = document_type(name, description, examples, added_by=scope.subject, reason=reason.strip())
        if await self._taxonomy.get_type(scope.tenant, kind.name) is not None:
            raise TypeExists(kind.name)
        # The anchor first (create-or-replace): with the embedder down nothing is stored, and a
        # retry can succeed; stored first, the type would stay without an anchor for good.
        await self._anchors.index_type(scope.tenant, kind)
        return await self._taxonomy.add_type(scope.tenant, kind, origin=PERSON)

    async def list_types(self, scope: Scope, *, include_retired: bool) -> list[StoredType]:
        return await self._taxonomy.types(scope.tenant, include_retired=include_retired)

    async def set_retired(self, scope: Scope, name: str, retired: bool) -> StoredType:
        stored = await self._taxonomy.set_retired(scope.tenant, name, retired, scope.subject)
        if stored is None:
            raise TypeNotFound(name)
        return stored

    async def add_schema(self, scope: Scope, type_name: str, schema_text: str) -> StoredSchema:
        if await self._taxonomy.get_type(scope.tenant, type_name) is None:
            raise TypeNotFound(type_name)
        schema = await _checked(processing.schema_from_text, type_name, 1, schema_text)
        return await self._taxonomy.add_schema(
            scope.tenant, type_name, schema.json_schema, added_by=scope.subject, origin=PERSON
        )

    async def list_schemas(self, scope: Scope, type_name: str) -> list[StoredSchema]:
        if await self._taxonomy.get_type(scope.tenant, type_name) is None:
            raise TypeNotFound(type_name)
        return await self._taxonomy.schemas(scope.tenant, type_name)

    # ---- classification ----

    async def classify(self, scope: Scope, *, document_id: int | None = None, text: str = "") -> ClassifyOutcome:
        await self._within_budget(scope)
        if document_id is not None:
            chunks = (await self._documents.content(scope, document_id)).chunks
        else:
            chunks = tuple(
                SourceChunk(i + 1, c.content, c.page, c.section) for i, c in enumerate(split_structural(text))
            )
        types = await self._taxonomy.types(scope.tenant)
        return await self._classify(scope, chunks, types, with_evidence=document_id is not None)

    async def _classify(
        self, scope: Scope, chunks: Sequence[SourceChunk], types: Sequence[StoredType], *, with_evidence: bool
    ) -> ClassifyOutcome:
        """Among the tenant's active ``types``."""
        names = [t.kind.name for t in types]
        read = [c for c in chunks if c.content.strip()][: self._tuning.classify_chunks]
        chunk_scores: dict[int, dict[str, float]] = {}
        if names:  # concurrently: the embedder batches concurrent calls
            scored = await asyncio.gather(
                *(self._anchors.scores(scope.tenant, chunk.content, ANCHOR_TOP_K) for chunk in read)
            )
            for chunk, scores in zip(read, scored, strict=True):
                chunk_scores[chunk.chunk_id] = {n: s for n, s in scores.items() if n in names}
        similarities, per_chunk = processing.document_scores(chunk_scores, names)
        evidence = per_chunk if with_evidence else None
        result = classifying.classify(similarities, evidence, self._tuning.calibration)
        cost = Cost()
        refused = ""
        if self._llm is not None and names and read:
            described = {t.kind.name: t.kind.description for t in types}
            described[UNCLASSIFIED] = UNCLASSIFIED_DESCRIPTION
            candidates = [result.type_name, *(c.type_name for c in result.alternatives)]
            messages = extraction.classification_messages(
                [(name, described.get(name, "")) for name in candidates],
                processing.excerpt(read, self._tuning.prompt_chars),
            )
            answer, cost = await self._chat(scope, messages, max_tokens=20)
            chosen = classifying.llm_choice(result, answer, evidence)
            if chosen is None:
                refused = answer.strip()[:200]
            else:
                result = chosen
        places = {c.chunk_id: (c.page, c.section) for c in read} if with_evidence else {}
        return ClassifyOutcome(result, cost, processing.classification_card(result), refused, places)

    # ---- extraction ----

    async def extract(
        self, scope: Scope, document_id: int, schema_name: str = "", schema_version: int = 0
    ) -> ExtractOutcome:
        content = await self._documents.content(scope, document_id)
        tables = self._tables(content)
        if not schema_name:
            return ExtractOutcome(tables, None, None, 0, Cost(), processing.extraction_card(tables, None))
        schema = await self._schema(scope.tenant, schema_name, schema_version)
        await self._within_budget(scope)
        values, attempts, cost = await self._fill(scope, schema, content.chunks)
        return ExtractOutcome(
            tables, values, schema, attempts, cost, processing.extraction_card(tables, values, schema)
        )

    @staticmethod
    def _tables(content: DocumentContent) -> tuple[ExtractedTable, ...]:
        return tuple(extract_tables((c.content, c.chunk_id) for c in content.chunks))

    async def _schema(self, tenant: str, type_name: str, version: int) -> ExtractionSchema:
        if await self._taxonomy.get_type(tenant, type_name) is None:
            raise TypeNotFound(type_name)
        for stored in await self._taxonomy.schemas(tenant, type_name):
            if version in (0, stored.schema.version):
                return stored.schema
        raise SchemaNotFound(type_name, version)

    async def _fill(
        self, scope: Scope, schema: ExtractionSchema, chunks: Sequence[SourceChunk]
    ) -> tuple[Checked, int, Cost]:
        """The schema's fields from the model, validated (bounded retries) and evidence-checked."""
        if self._llm is None:
            raise LlmNotConfigured("extraction with a schema")
        shown = processing.prompt_chunks(chunks, self._tuning.prompt_chars)
        cost = Cost()
        problem = ""
        for attempt in range(1, extraction.MAX_ATTEMPTS + 1):
            answer, spent = await self._chat(
                scope, extraction.extraction_messages(schema, shown, problem), json_object=True
            )
            cost = cost + spent
            interpretation = await _checked(extraction.interpret, answer, schema)
            if interpretation.acceptable:
                return checked(interpretation.claims, shown), attempt, cost
            problem = interpretation.problem
        raise ExtractionInvalid(
            "schema_name",
            f"the language model's answer did not satisfy the schema after {extraction.MAX_ATTEMPTS} attempts: {problem}",
        )

    # ---- processing ----

    async def process(self, scope: Scope, document_id: int) -> tuple[ProcessingResult, bool]:
        started = self._clock()
        await self._within_budget(scope)
        content = await self._documents.content(scope, document_id)
        types = await self._taxonomy.types(scope.tenant)
        classified = await self._classify(scope, content.chunks, types, with_evidence=True)
        result, cost = classified.classification, classified.cost
        after_classify = self._clock()
        notes: list[str] = []
        kinds = {t.kind.name: t.kind for t in types}
        type_name, proposed = result.type_name, False
        if processing.needs_proposal(result, self._tuning.proposal_threshold):
            proposal, proposed, spent = await self._propose(scope, content, result)
            cost = cost + spent
            if proposal is None:
                type_name = UNCLASSIFIED
                notes.append(
                    "unclassified proposal: no type fits and no language model is configured to name one "
                    "(set KNOWLEDGE_LLM_URL and KNOWLEDGE_LLM_MODEL)"
                    if self._llm is None
                    else "unclassified proposal: the language model proposed no acceptable type"
                )
            else:
                type_name = proposal.kind.name
                kinds[type_name] = proposal.kind
        schema: ExtractionSchema | None = None
        if type_name != UNCLASSIFIED:  # an active type classified, or the one proposed
            schema, spent, note = await self._schema_for(scope, kinds[type_name], content)
            cost = cost + spent
            if note:
                notes.append(note)
        after_taxonomy = self._clock()
        version = schema.version if schema is not None else 0
        existing = await self._results.find(scope.tenant, document_id, content.content_hash, type_name, version)
        if existing is not None:
            return existing, True
        tables = self._tables(content)
        values: Checked | None = None
        if schema is not None and self._llm is None:
            notes.append(
                f"no fields: extraction with {schema.type_name} v{schema.version} needs a language model "
                "(set KNOWLEDGE_LLM_URL and KNOWLEDGE_LLM_MODEL)"
            )
        elif schema is not None:
            try:
                values, _, spent = await self._fill(scope, schema, content.chunks)
                cost = cost + spent
            except ExtractionInvalid as error:  # the result still records the type and the tables
                notes.append(f"no fields: {error.message}")
        done = self._clock()
        stored = ProcessingResult(
            document_id=document_id,
            content_hash=content.content_hash,
            type_name=type_name,
            confidence=result.confidence,
            proposed_type=proposed,
            schema_version=version,
            outcome=outcome_json(tables, values, notes),
            cost=cost,
            timings=Timings(
                classify_ms=_ms(after_classify - started),
                taxonomy_ms=_ms(after_taxonomy - after_classify),
                extract_ms=_ms(done - after_taxonomy),
            ),
            run_by=scope.subject,
            model=self._llm.model if self._llm is not None and cost.items else "",
            notes=tuple(notes),
        )
        return await self._results.add(scope.tenant, stored)

    async def _propose(
        self, scope: Scope, content: DocumentContent, result: classifying.Classification
    ) -> tuple[StoredType | None, bool, Cost]:
        """A new type for a document no type fits, added with its provenance; None without a
        model or when the model's proposals are refused. The flag: whether this call added it
        (a type the tenant has, proposed earlier for another document or not, is not a proposal)."""
        if self._llm is None:
            return None, False, Cost()
        existing = await self._taxonomy.types(scope.tenant, include_retired=True)
        text = processing.excerpt(content.chunks, self._tuning.prompt_chars)
        reason = f"proposed for document {content.document_id} (best fit {result.type_name} at {result.confidence:.0%})"
        cost, problem = Cost(), ""
        for _ in range(extraction.MAX_ATTEMPTS):
            answer, spent = await self._chat(
                scope, processing.proposal_messages([t.kind for t in existing], text, problem), json_object=True
            )
            cost = cost + spent
            proposal = processing.interpret_proposal(answer, added_by=scope.subject, reason=reason)
            if proposal.kind is None:
                problem = proposal.problem
                continue
            known = next((t for t in existing if t.kind.name == proposal.kind.name), None)
            if known is not None:  # the model named a type the tenant has: the document is of it
                return (None, False, cost) if known.retired else (known, False, cost)
            await self._anchors.index_type(scope.tenant, proposal.kind)  # before it is stored, as in create_type
            stored = await self._taxonomy.add_type(
                scope.tenant, proposal.kind, origin=PROPOSAL, proposed_for=content.document_id
            )
            return stored, True, cost
        return None, False, cost

    async def _schema_for(
        self, scope: Scope, kind: DocumentType, content: DocumentContent
    ) -> tuple[ExtractionSchema | None, Cost, str]:
        type_name = kind.name
        schemas = await self._taxonomy.schemas(scope.tenant, type_name)
        if schemas:
            return schemas[0].schema, Cost(), ""
        if self._llm is None:
            return None, Cost(), f"no schema: {type_name} has none and no language model is configured to write one"
        text = processing.excerpt(content.chunks, self._tuning.prompt_chars)
        cost, problem = Cost(), ""
        for _ in range(extraction.MAX_ATTEMPTS):
            answer, spent = await self._chat(scope, processing.schema_messages(kind, text, problem), json_object=True)
            cost = cost + spent
            generated = await _checked(processing.interpret_schema, answer, type_name, 1)
            if generated.schema is not None:
                saved = await self._taxonomy.add_schema(
                    scope.tenant, type_name, generated.schema.json_schema, added_by=SERVICE_SUBJECT, origin=GENERATED
                )
                return saved.schema, cost, ""
            problem = generated.problem
        return None, cost, f"no schema: the language model wrote no valid schema for {type_name} ({problem})"

    async def page_results(
        self, scope: Scope, document_id: int, after_id: int | None, limit: int
    ) -> list[ProcessingResult]:
        await self._documents.visible(scope, document_id)  # 404 outside the caller's reach
        return await self._results.page(scope.tenant, document_id, after_id, limit)

    # ---- the model ----

    async def _within_budget(self, scope: Scope) -> None:
        """Once per use case, before its first LLM call: refused (BUDGET_EXHAUSTED) when the
        tenant's LLM budget for the month is spent. Without a model there is nothing to spend."""
        if self._llm is None or self._budget is None:
            return
        refusal = await self._budget.refusal(scope.tenant)
        if refusal is not None:
            raise refusal

    async def _chat(
        self, scope: Scope, messages: Sequence[Mapping[str, str]], *, max_tokens: int = 800, json_object: bool = False
    ) -> tuple[str, Cost]:
        if self._llm is None:
            raise LlmNotConfigured("this call")
        reply = await self._llm.complete(messages, max_tokens=max_tokens, json_object=json_object)
        item = CostItem(reply.model, "chat", reply.messages, reply.prompt_tokens, reply.completion_tokens, reply.amount)
        await self._ledger.record(scope.tenant, item)
        return reply.text, Cost((item,))


def outcome_json(tables: Sequence[ExtractedTable], values: Checked | None, notes: Sequence[str]) -> dict[str, Any]:
    """A processing's outcome as it is stored (JSON)."""
    return {
        "tables": [table_json(t) for t in tables],
        "fields": [
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
            for v in (values.values if values else ())
        ],
        "dropped": [{"name": d.field, "why": d.why} for d in (values.dropped if values else ())],
        "notes": list(notes),
    }


def table_json(table: ExtractedTable) -> dict[str, Any]:
    return {
        "title": table.title,
        **table.schema(),
        "rows": [list(row) for row in table.rows],
        "chunk_ids": [s for s in table.sources if isinstance(s, int)],
    }


def _ms(seconds: float) -> int:
    return max(0, round(seconds * 1000))
