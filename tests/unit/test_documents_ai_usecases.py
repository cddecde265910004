"""Document AI's use cases with fakes at every port: classification (embedding and LLM paths),
extraction (schemaless and with a schema: retries, refusals, evidence), processing (proposals,
generated schemas, idempotency), and the taxonomy's reversible growth."""

from __future__ import annotations

import asyncio
import gc
import json
import time

import pytest
from knowledge_documents_ai.domain import limits
from knowledge_documents_ai.domain.errors import DocumentNotFound, ExtractionInvalid, TypeExists, TypeNotFound
from knowledge_documents_ai.domain.evidence import SourceChunk
from knowledge_documents_ai.domain.model import PROPOSAL, ProcessingResult, StoredSchema, StoredType
from knowledge_documents_ai.domain.processing import DocumentContent
from knowledge_documents_ai.domain.taxonomy import UNCLASSIFIED, DocumentType, extraction_schema
from knowledge_documents_ai.usecases import DocumentsAi
from knowledge_runtime.auth import Scope
from knowledge_runtime.llm import ChatReply
from knowledge_runtime.refusals import Refusal, Refused

SCOPE = Scope("acme", frozenset({"taxonomy.edit", "corpus.read"}), "user-1", scope_claim="/")
INVOICE_TEXT = "Invoice number INV-7 issued by Globex. Total due: 1,250.00 EUR. Payment within 30 days."
TABLE = "| item | qty | price |\n|---|---|---|\n| bolts | 10 | 2.50 |\n| nuts | 4 | 0.75 |"
SCHEMA = {
    "type": "object",
    "properties": {
        "number": {"type": "string", "description": "the invoice number"},
        "total": {"type": "number", "description": "the amount due"},
    },
    "required": ["number"],
}


class MemoryTaxonomy:
    def __init__(self) -> None:
        self.kinds: dict[str, StoredType] = {}
        self.versions: dict[str, list[StoredSchema]] = {}

    async def types(self, tenant, *, include_retired=False):
        return [t for _, t in sorted(self.kinds.items()) if include_retired or not t.retired]

    async def get_type(self, tenant, name):
        return self.kinds.get(name)

    async def add_type(self, tenant, kind, *, origin, proposed_for=None):
        if kind.name in self.kinds:
            raise TypeExists(kind.name)
        self.kinds[kind.name] = StoredType(kind, origin, proposed_for)
        return self.kinds[kind.name]

    async def set_retired(self, tenant, name, retired, by):
        if name not in self.kinds:
            return None
        old = self.kinds[name]
        self.kinds[name] = StoredType(old.kind, old.origin, old.proposed_for, retired)
        return self.kinds[name]

    async def schemas(self, tenant, type_name):
        return list(reversed(self.versions.get(type_name, [])))

    async def add_schema(self, tenant, type_name, json_schema, *, added_by, origin):
        versions = self.versions.setdefault(type_name, [])
        stored = StoredSchema(extraction_schema(type_name, len(versions) + 1, json_schema), added_by, None, origin)
        versions.append(stored)
        return stored


class MemoryDocuments:
    def __init__(self, **documents: list[str]) -> None:
        self.documents = {
            int(key[1:]): DocumentContent(
                int(key[1:]), tuple(SourceChunk(int(key[1:]) * 100 + i, t, i + 1, "") for i, t in enumerate(texts))
            )
            for key, texts in documents.items()
        }

    async def visible(self, scope, document_id):
        if document_id not in self.documents:
            raise DocumentNotFound(str(document_id))

    async def content(self, scope, document_id):
        await self.visible(scope, document_id)
        return self.documents[document_id]


class WordAnchors:
    """A type's score: the share of its anchor's words found in the text (a stand-in for cosine)."""

    def __init__(self) -> None:
        self.anchors: dict[str, set[str]] = {}

    async def index_type(self, tenant, kind: DocumentType):
        self.anchors[kind.name] = set(f"{kind.name} {kind.description}".lower().replace("_", " ").split())

    async def scores(self, tenant, text, top_k):
        words = set(text.lower().replace(".", " ").replace(":", " ").split())
        return {name: len(anchor & words) / len(anchor) for name, anchor in self.anchors.items()}


class MemoryResults:
    def __init__(self) -> None:
        self.rows: list[ProcessingResult] = []

    async def find(self, tenant, document_id, content_hash, type_name, schema_version):
        key = (document_id, content_hash, type_name, schema_version)
        return next(
            (r for r in self.rows if (r.document_id, r.content_hash, r.type_name, r.schema_version) == key), None
        )

    async def add(self, tenant, result):
        found = await self.find(
            tenant, result.document_id, result.content_hash, result.type_name, result.schema_version
        )
        if found is not None:
            return found, True
        self.rows.append(result)
        return result, False

    async def page(self, tenant, document_id, after_id, limit):
        return [r for r in reversed(self.rows) if r.document_id == document_id][:limit]


class Ledger:
    def __init__(self) -> None:
        self.items = []

    async def record(self, tenant, item):
        self.items.append((tenant, item))


class ScriptedChat:
    model = "scripted"

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.calls: list[list[dict]] = []

    async def complete(self, messages, *, max_tokens=800, json_object=False):
        self.calls.append([dict(m) for m in messages])
        return ChatReply(self.answers.pop(0), self.model, len(messages), 100, 10, 0.002)


def service(llm=None, **documents):
    ai = DocumentsAi(MemoryTaxonomy(), MemoryDocuments(**documents), WordAnchors(), MemoryResults(), Ledger(), llm)
    return ai


async def with_types(ai):
    await ai.create_type(SCOPE, "invoice", "invoice number total due payment issued", [], "billing")
    await ai.create_type(SCOPE, "policy", "policy rules employees must follow travel", [], "hr")


async def test_types_are_created_with_provenance_and_indexed_as_anchors_once():
    ai = service()
    stored = await ai.create_type(SCOPE, "invoice", "A bill", ["Invoice 1"], "we get bills")
    assert (stored.kind.added_by, stored.kind.reason, stored.origin) == ("user-1", "we get bills", "person")
    assert "invoice" in ai._anchors.anchors
    with pytest.raises(TypeExists):
        await ai.create_type(SCOPE, "invoice", "again", [], "")


async def test_classification_by_embedding_needs_no_llm_and_cites_the_driving_chunks():
    ai = service(d1=["Unrelated cover page.", INVOICE_TEXT])
    await with_types(ai)
    outcome = await ai.classify(SCOPE, document_id=1)
    result = outcome.classification
    assert result.type_name == "invoice" and result.decided_by == "embedding"
    assert result.evidence[0].chunk_id == 101  # the invoice chunk drove it, not the cover page
    assert {c.type_name for c in result.alternatives} == {"policy", UNCLASSIFIED}
    assert outcome.card.kind == "classification_result" and "invoice" in outcome.card.title
    assert outcome.chunk_places[101] == (2, "")


async def test_a_text_no_type_fits_is_unclassified():
    ai = service()
    await with_types(ai)
    outcome = await ai.classify(SCOPE, text="Minutes of the rowing club's annual barbecue.")
    assert outcome.classification.type_name == UNCLASSIFIED and not outcome.classification.evidence


async def test_the_llm_decides_among_the_candidates_and_its_cost_is_recorded():
    chat = ScriptedChat("policy")
    ai = service(chat, d1=[INVOICE_TEXT])
    await with_types(ai)
    outcome = await ai.classify(SCOPE, document_id=1)
    assert outcome.classification.type_name == "policy" and outcome.classification.decided_by == "llm"
    assert "- invoice:" in chat.calls[0][1]["content"]
    ((tenant, item),) = ai._ledger.items
    assert (tenant, item.model_id, item.operation, item.input_tokens) == ("acme", "scripted", "chat", 100)
    assert outcome.cost.amount == pytest.approx(0.002)


async def test_an_llm_answer_naming_no_candidate_is_refused_and_the_embedding_kept():
    ai = service(ScriptedChat("a recipe"), d1=[INVOICE_TEXT])
    await with_types(ai)
    outcome = await ai.classify(SCOPE, document_id=1)
    assert outcome.classification.type_name == "invoice" and outcome.classification.decided_by == "embedding"
    assert outcome.refused_llm_answer == "a recipe"


async def test_schemaless_extraction_reads_the_tables_without_a_model():
    ai = service(d1=["Intro.", TABLE])
    outcome = await ai.extract(SCOPE, 1)
    (table,) = outcome.tables
    assert [(c.name, c.type) for c in table.columns] == [("item", "text"), ("qty", "integer"), ("price", "number")]
    assert table.rows[0] == ("bolts", 10, 2.5) and table.sources == (101,)
    assert outcome.checked is None and outcome.card.kind == "extraction_result"


async def test_extraction_with_a_schema_without_a_model_refuses_saying_what_to_configure():
    ai = service(d1=[INVOICE_TEXT])
    await with_types(ai)
    await ai.add_schema(SCOPE, "invoice", json.dumps(SCHEMA))
    with pytest.raises(Refused) as caught:
        await ai.extract(SCOPE, 1, "invoice")
    assert caught.value.reason == "RUNTIME_UNAVAILABLE" and "KNOWLEDGE_LLM_URL" in caught.value.message


def claims(*values):
    return json.dumps({"values": [dict(zip(("field", "value", "chunk_id", "quote"), v, strict=True)) for v in values]})


async def test_invalid_answers_are_retried_and_values_without_evidence_dropped():
    chat = ScriptedChat(
        "not json",
        claims(("number", 7, 100, "INV-7")),  # a number where the schema says string
        claims(("number", "INV-7", 100, "Invoice number INV-7"), ("total", 1250.0, 100, "Total due: 9,999")),
    )
    ai = service(chat, d1=[INVOICE_TEXT])
    await with_types(ai)
    await ai.add_schema(SCOPE, "invoice", json.dumps(SCHEMA))
    outcome = await ai.extract(SCOPE, 1, "invoice")
    assert outcome.attempts == 3
    assert "is not of type 'string'" in chat.calls[2][1]["content"]  # the retry says what was wrong
    (value,) = outcome.checked.values
    assert (value.field, value.value, value.evidence.chunk_id) == ("number", "INV-7", 100)
    assert value.evidence.quote in INVOICE_TEXT
    assert [(d.field, d.why) for d in outcome.checked.dropped] == [("total", "quote not found in chunk 100")]
    assert len(ai._ledger.items) == 3


async def test_three_invalid_answers_are_a_clear_refusal():
    ai = service(ScriptedChat("no", "still no", '{"values": 3}'), d1=[INVOICE_TEXT])
    await with_types(ai)
    await ai.add_schema(SCOPE, "invoice", json.dumps(SCHEMA))
    with pytest.raises(ExtractionInvalid) as caught:
        await ai.extract(SCOPE, 1, "invoice")
    assert "after 3 attempts" in caught.value.message and caught.value.code == "INVALID_ARGUMENT"


async def test_checking_an_answer_runs_off_the_event_loop_and_stops_at_its_time_limit():
    # Each level refers twice to the one below: 2**40 checks of one value, were it let run.
    defs = {"l0": {"type": "null"}}
    for level in range(1, 41):
        defs[f"l{level}"] = {"anyOf": [{"$ref": f"#/$defs/l{level - 1}"}] * 2}
    schema = {
        "type": "object",
        "properties": {"number": {"description": "the invoice number", "$ref": "#/$defs/l40"}},
        "$defs": defs,
    }
    ai = service(ScriptedChat(claims(("number", "INV-7", 100, "INV-7"))), d1=[INVOICE_TEXT])
    await with_types(ai)
    await ai.add_schema(SCOPE, "invoice", json.dumps(schema))
    gaps: list[float] = []

    async def tick() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.01)
            gaps.append(time.monotonic() - last)
            last = time.monotonic()

    # What earlier tests left is not this test's pause: a full collection the check's garbage
    # triggers would otherwise walk every object the whole run has kept alive (0.7 s in CI).
    gc.collect()
    gc.freeze()
    ticker = asyncio.create_task(tick())
    started = time.monotonic()
    try:
        with pytest.raises(ExtractionInvalid) as caught:
            await ai.extract(SCOPE, 1, "invoice")
    finally:
        ticker.cancel()
        gc.unfreeze()
    elapsed = time.monotonic() - started
    assert elapsed < limits.VALIDATION_SECONDS + 1.5
    assert "longer than" in caught.value.message and caught.value.code == "INVALID_ARGUMENT"
    # The loop went on serving meanwhile: ticking all along, never held for the bulk of the check
    # (a collection of the check's garbage may still pause it briefly).
    assert len(gaps) > 10 and max(gaps) < elapsed / 2, (max(gaps), elapsed)


async def test_processing_without_a_model_is_a_marked_unclassified_proposal_and_idempotent():
    ai = service(d1=["Minutes of the rowing club.", TABLE])
    await with_types(ai)
    result, existing = await ai.process(SCOPE, 1)
    assert not existing and result.type_name == UNCLASSIFIED and not result.proposed_type
    assert result.schema_version == 0 and "KNOWLEDGE_LLM_URL" in result.notes[0]
    assert result.outcome["tables"][0]["row_count"] == 2 and result.run_by == "user-1"
    assert set(ai._taxonomy.kinds) == {"invoice", "policy"}  # the taxonomy did not grow
    again, existing = await ai.process(SCOPE, 1)
    assert existing and again is result


async def test_processing_proposes_a_type_generates_its_schema_and_extracts():
    schema = {
        "type": "object",
        "properties": {"club": {"type": "string", "description": "the club's name"}},
    }
    chat = ScriptedChat(
        "unclassified",  # the LLM's classification among the candidates
        '{"name": "Meeting_Minutes", "description": "Minutes of a meeting."}',
        json.dumps(schema),
        claims(("club", "rowing club", 100, "the rowing club")),
    )
    ai = service(chat, d1=["Minutes of the rowing club. Present: five members."])
    await with_types(ai)
    result, existing = await ai.process(SCOPE, 1)
    assert not existing and result.type_name == "meeting_minutes" and result.proposed_type
    kind = ai._taxonomy.kinds["meeting_minutes"]
    assert kind.origin == PROPOSAL and kind.proposed_for == 1 and "proposed for document 1" in kind.kind.reason
    assert "meeting_minutes" in ai._anchors.anchors  # classification will know it from now on
    assert ai._taxonomy.versions["meeting_minutes"][0].origin == "generated"
    assert result.schema_version == 1 and result.model == "scripted"
    assert [f["value"] for f in result.outcome["fields"]] == ["rowing club"]
    assert all(f["evidence"]["quote"] for f in result.outcome["fields"])
    assert len(result.cost.items) == 4 == len(ai._ledger.items)


async def test_a_retired_type_leaves_classification_and_comes_back_restored():
    ai = service(d1=[INVOICE_TEXT])
    await with_types(ai)
    await ai.set_retired(SCOPE, "invoice", True)
    assert (await ai.classify(SCOPE, document_id=1)).classification.type_name != "invoice"
    assert [t.kind.name for t in await ai.list_types(SCOPE, include_retired=True)] == ["invoice", "policy"]
    await ai.set_retired(SCOPE, "invoice", False)
    assert (await ai.classify(SCOPE, document_id=1)).classification.type_name == "invoice"
    with pytest.raises(TypeNotFound):
        await ai.set_retired(SCOPE, "nothing", True)


async def test_processing_as_a_new_type_without_a_schema_is_a_new_result_not_the_unclassified_one():
    ai = service(d1=["Minutes of the rowing club meeting."])
    await with_types(ai)
    first, _ = await ai.process(SCOPE, 1)
    assert first.type_name == UNCLASSIFIED and first.schema_version == 0
    await ai.create_type(SCOPE, "minutes", "minutes of the rowing club meeting", [], "we keep minutes")
    second, existing = await ai.process(SCOPE, 1)
    assert not existing and (second.type_name, second.schema_version) == ("minutes", 0)
    assert [r.type_name for r in ai._results.rows] == [UNCLASSIFIED, "minutes"]


async def test_a_type_proposed_for_another_document_is_no_proposal_when_named_again():
    schema = {"type": "object", "properties": {"club": {"type": "string", "description": "the club's name"}}}
    proposal = '{"name": "meeting_minutes", "description": "Minutes of a meeting."}'
    chat = ScriptedChat(
        *("unclassified", proposal, json.dumps(schema), claims(("club", "rowing club", 100, "the rowing club"))),
        *("unclassified", proposal, claims(("club", "chess society", 200, "the chess society"))),
    )
    ai = service(chat, d1=["Minutes of the rowing club."], d2=["Notes from the chess society."])
    await with_types(ai)
    first, _ = await ai.process(SCOPE, 1)
    second, existing = await ai.process(SCOPE, 2)
    assert first.type_name == "meeting_minutes" and first.proposed_type
    assert not existing and second.type_name == "meeting_minutes" and not second.proposed_type


class DownAnchors(WordAnchors):
    """The embedder unreachable while ``down``."""

    down = True

    async def index_type(self, tenant, kind: DocumentType):
        if self.down:
            raise Refused(Refusal.RUNTIME_UNAVAILABLE, "the embedder is unreachable")
        await super().index_type(tenant, kind)


async def test_a_type_is_not_stored_without_its_anchor_so_a_retry_succeeds():
    anchors = DownAnchors()
    ai = DocumentsAi(MemoryTaxonomy(), MemoryDocuments(), anchors, MemoryResults(), Ledger())
    with pytest.raises(Refused):
        await ai.create_type(SCOPE, "invoice", "A bill", [], "we get bills")
    assert not ai._taxonomy.kinds
    anchors.down = False
    stored = await ai.create_type(SCOPE, "invoice", "A bill", [], "we get bills")
    assert stored.kind.name == "invoice" and "invoice" in anchors.anchors


class SpentBudget:
    def __init__(self) -> None:
        self.asked: list[str] = []

    async def refusal(self, tenant):
        self.asked.append(tenant)
        return Refused(Refusal.BUDGET_EXHAUSTED, "the tenant's LLM budget for this month is spent")


async def test_a_spent_llm_budget_refuses_the_use_cases_that_call_the_model_before_any_call():
    chat, budget = ScriptedChat(), SpentBudget()
    ai = DocumentsAi(
        MemoryTaxonomy(),
        MemoryDocuments(d1=[INVOICE_TEXT]),
        WordAnchors(),
        MemoryResults(),
        Ledger(),
        chat,
        budget=budget,
    )
    await with_types(ai)
    await ai.add_schema(SCOPE, "invoice", json.dumps(SCHEMA))
    for call in (
        ai.classify(SCOPE, document_id=1),
        ai.extract(SCOPE, 1, "invoice"),
        ai.process(SCOPE, 1),
    ):
        with pytest.raises(Refused) as caught:
            await call
        assert caught.value.reason == "BUDGET_EXHAUSTED"
    assert not chat.calls and not ai._ledger.items and not ai._results.rows
    assert budget.asked == ["acme"] * 3  # once per use case
    assert (await ai.extract(SCOPE, 1)).checked is None  # schemaless extraction calls no model


class IngestingDocuments(MemoryDocuments):
    async def content(self, scope, document_id):
        raise Refused(Refusal.INDEXING, "the document is still being ingested")


async def test_stored_results_are_listed_while_the_document_is_reingested_and_not_outside_reach():
    documents = IngestingDocuments(d1=[INVOICE_TEXT])
    ai = DocumentsAi(MemoryTaxonomy(), documents, WordAnchors(), MemoryResults(), Ledger())
    stored = ProcessingResult(1, "ab" * 32, "invoice", 0.9, False, 0, {})
    ai._results.rows.append(stored)
    assert await ai.page_results(SCOPE, 1, None, 10) == [stored]
    with pytest.raises(DocumentNotFound):
        await ai.page_results(SCOPE, 2, None, 10)
