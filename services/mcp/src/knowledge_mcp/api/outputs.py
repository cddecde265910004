"""The tools' output schemas (pydantic models: the SDK publishes each as the tool's
``outputSchema``) and their conversions from the services' messages."""

from __future__ import annotations

import json
from typing import Any, Literal

from google.protobuf import json_format
from knowledge.v1 import documents_ai_pb2, ingest_pb2, search_pb2
from pydantic import BaseModel, Field

RELEVANCE = {
    search_pb2.RELEVANCE_UNSPECIFIED: "NONE",
    search_pb2.RELEVANCE_HIGH: "HIGH",
    search_pb2.RELEVANCE_MODERATE: "MODERATE",
    search_pb2.RELEVANCE_LOW: "LOW",
    search_pb2.RELEVANCE_LEXICAL_MATCH: "LEXICAL_MATCH",
}
Relevance = Literal["NONE", "HIGH", "MODERATE", "LOW", "LEXICAL_MATCH"]


def _struct(message: Any) -> dict[str, Any]:
    return json_format.MessageToDict(message) if message.ByteSize() else {}


def _state(value: int) -> str:
    return ingest_pb2.DocumentState.Name(value).removeprefix("DOCUMENT_STATE_")


# -- retrieval ----------------------------------------------------------------------------


class Source(BaseModel):
    source: int = Field(description='Its number in the text: "[Source N ...]".')
    document_id: str
    filename: str
    corpus_id: str
    chunk_id: str
    section: str
    page: int
    score: float = Field(description="Cosine similarity to the query, 0 to 1.")
    content: str = Field(description="The passage in full.")
    source_url: str = ""
    document_ref: str = ""
    fragment: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)


class SearchOutput(BaseModel):
    relevance: Relevance
    synthesis: str = Field(description="A short answer citing [n] sources; empty when nothing relevant was found.")
    result_count: int
    results: list[Source]


def search_output(reply: search_pb2.SearchDocumentsResponse) -> SearchOutput:
    return SearchOutput(
        relevance=RELEVANCE.get(reply.relevance, "NONE"),  # type: ignore[arg-type]  # the map's values are the Literal's
        synthesis=reply.synthesis,
        result_count=reply.result_count,
        results=[
            Source(
                source=number,
                document_id=r.document_id,
                filename=r.filename,
                corpus_id=r.corpus_id,
                chunk_id=r.chunk_id,
                section=r.section,
                page=r.page,
                score=r.score,
                content=r.content,
                source_url=r.source_url,
                document_ref=r.document_ref,
                fragment=r.fragment,
                metadata={**_struct(r.document_metadata), **_struct(r.metadata)},
            )
            for number, r in enumerate(reply.results, start=1)
        ],
    )


class DocumentPage(BaseModel):
    document_id: str
    page: int
    page_count: int
    text: str
    next_page: int | None = Field(description="The next page's number; null on the last page.")
    previous_page: int | None = Field(description="The previous page's number; null on the first page.")
    next_call: str = Field(description="The call that reads the next page; empty on the last page.")
    previous_call: str = Field(description="The call that reads the previous page; empty on the first page.")
    source_url: str = ""


class Fact(BaseModel):
    statement: str
    support: str
    status: str
    evidence_ids: list[str]


class Evidence(BaseModel):
    evidence_id: str
    document_id: str
    filename: str
    page: int
    section: str
    excerpt: str
    source_url: str = ""


class ContextOutput(BaseModel):
    rendered: str = Field(description="The block to give a model: labelled facts with their support levels.")
    relevance: Relevance
    facts: list[Fact]
    evidence: list[Evidence]
    degradations: list[str]


def context_output(reply: search_pb2.GetContextResponse) -> ContextOutput:
    found = reply.context
    return ContextOutput(
        rendered=found.rendered,
        relevance=RELEVANCE.get(found.metadata.relevance, "NONE"),  # type: ignore[arg-type]
        facts=[
            Fact(
                statement=f.statement,
                support=search_pb2.SupportLevel.Name(f.support).removeprefix("SUPPORT_LEVEL_"),
                status=search_pb2.FactStatus.Name(f.status).removeprefix("FACT_STATUS_"),
                evidence_ids=list(f.evidence_ids),
            )
            for f in found.facts
        ],
        evidence=[
            Evidence(
                evidence_id=e.evidence_id,
                document_id=e.document_id,
                filename=e.filename,
                page=e.page,
                section=e.section,
                excerpt=e.excerpt,
                source_url=e.source_url,
            )
            for e in found.evidence
        ],
        degradations=list(found.metadata.degradations),
    )


class PrefetchOutput(BaseModel):
    rendered: str = Field(description='"[SUGGESTED CONTEXT]" and its entries; empty when none.')
    entry_count: int
    degraded: bool
    degradations: list[str]


def prefetch_output(reply: search_pb2.PrefetchContextResponse) -> PrefetchOutput:
    return PrefetchOutput(
        rendered=reply.rendered,
        entry_count=reply.entry_count,
        degraded=reply.degraded,
        degradations=list(reply.degradations),
    )


# -- corpora and documents ----------------------------------------------------------------


class CorpusOut(BaseModel):
    corpus_id: str
    name: str
    description: str
    document_count: int
    chunk_count: int


def corpus_out(corpus: ingest_pb2.Corpus) -> CorpusOut:
    return CorpusOut(
        corpus_id=corpus.corpus_id,
        name=corpus.name,
        description=corpus.description,
        document_count=corpus.document_count,
        chunk_count=corpus.chunk_count,
    )


class CorporaOutput(BaseModel):
    corpora: list[CorpusOut]


class MoveOutput(BaseModel):
    moved_count: int
    moved_document_ids: list[str]
    target_corpus_id: str


# -- document AI --------------------------------------------------------------------------


class TypeScore(BaseModel):
    type_name: str
    probability: float


class ClassifyOutput(BaseModel):
    type_name: str = Field(description='The chosen type, or "unclassified".')
    confidence: float
    alternatives: list[TypeScore]
    decided_by: str
    summary: str = Field(description="The classification as Markdown.")


def classify_output(reply: documents_ai_pb2.ClassifyDocumentResponse) -> ClassifyOutput:
    return ClassifyOutput(
        type_name=reply.type_name,
        confidence=reply.confidence,
        alternatives=[TypeScore(type_name=a.type_name, probability=a.probability) for a in reply.alternatives],
        decided_by=reply.decided_by,
        summary=reply.card.markdown,
    )


class FieldValue(BaseModel):
    name: str
    value: Any = Field(description="The value, as JSON.")
    quote: str = Field(description="The words it was read from.")
    chunk_id: str
    page: int
    section: str


class Table(BaseModel):
    title: str
    columns: list[str]
    row_count: int
    rows: list[list[Any]]


class Dropped(BaseModel):
    name: str
    why: str


def _fields(fields: Any) -> list[FieldValue]:
    return [
        FieldValue(
            name=f.name,
            value=json.loads(f.value_json) if f.value_json else None,
            quote=f.evidence.quote,
            chunk_id=f.evidence.chunk_id,
            page=f.evidence.page,
            section=f.evidence.section,
        )
        for f in fields
    ]


def _tables(tables: Any) -> list[Table]:
    return [
        Table(
            title=t.title,
            columns=[c.name for c in t.columns],
            row_count=t.row_count,
            rows=[json.loads(row) for row in t.rows_json],
        )
        for t in tables
    ]


class ExtractOutput(BaseModel):
    schema_name: str
    schema_version: int
    fields: list[FieldValue]
    dropped: list[Dropped]
    tables: list[Table]
    summary: str = Field(description="The extraction as Markdown.")


def extract_output(reply: documents_ai_pb2.ExtractDocumentResponse) -> ExtractOutput:
    return ExtractOutput(
        schema_name=reply.schema_name,
        schema_version=reply.schema_version,
        fields=_fields(reply.fields),
        dropped=[Dropped(name=d.name, why=d.why) for d in reply.dropped],
        tables=_tables(reply.tables),
        summary=reply.card.markdown,
    )


class ProcessOutput(BaseModel):
    result_id: str
    document_id: str
    type_name: str
    confidence: float
    proposed_type: bool = Field(description="Whether processing added this type to the taxonomy.")
    schema_version: int
    fields: list[FieldValue]
    dropped: list[Dropped]
    tables: list[Table]
    notes: list[str]
    existing: bool = Field(description="Whether the same processing was already stored (nothing was redone).")


def process_output(reply: documents_ai_pb2.ProcessDocumentResponse) -> ProcessOutput:
    result = reply.result
    return ProcessOutput(
        result_id=result.result_id,
        document_id=result.document_id,
        type_name=result.type_name,
        confidence=result.confidence,
        proposed_type=result.proposed_type,
        schema_version=result.schema_version,
        fields=_fields(result.fields),
        dropped=[Dropped(name=d.name, why=d.why) for d in result.dropped],
        tables=_tables(result.tables),
        notes=list(result.notes),
        existing=reply.existing,
    )


# -- indexing -----------------------------------------------------------------------------


class IndexOutput(BaseModel):
    kind: Literal["chunks", "anchor"]
    state: str = Field(description="chunks: the ingestion's state (SEARCHABLE when done); anchor: WRITTEN.")
    job_id: str = ""
    document_id: str = ""
    corpus_id: str = ""
    chunk_count: int = 0
    anchor_id: str = ""
    message: str = ""


class AnchorOutput(BaseModel):
    anchor_id: str
    piece_count: int


def state_name(value: int) -> str:
    return _state(value)
