"""The MCP adapter's tests' shared parts: a fake of the services it calls (recording the token
each call carried), a KnowledgeError as a service would answer it, and what every tool result
must be (the contract) and every input schema must not hold (a reach argument)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import jsonschema
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from knowledge.v1 import documents_ai_pb2, embedder_pb2, ingest_pb2, search_pb2
from knowledge_client import KnowledgeError
from knowledge_runtime.auth import current_token

# The tools the issue names, and the one prompt.
TOOLS = {
    "search_documents",
    "get_document_text",
    "create_corpus",
    "list_corpora",
    "move_documents",
    "classify_document",
    "extract_document",
    "process_document",
    "index_content",
    "refresh_anchor",
    "get_context",
    "prefetch_context",
}
PROMPT = "knowledge_context"
# What no tool may take: a model chooses arguments, and the reach must not be chosen by a model.
REACH_WORDS = ("tenant", "scope", "project", "workspace", "clearance")


def knowledge_error(code: grpc.StatusCode, reason: str, message: str = "m", **metadata: str) -> KnowledgeError:
    detail = any_pb2.Any()
    detail.Pack(error_details_pb2.ErrorInfo(reason=reason, domain="knowledge.v1", metadata=metadata))
    status = status_pb2.Status(code=code.value[0], message=message, details=[detail])
    trailers = grpc.aio.Metadata(("grpc-status-details-bin", status.SerializeToString()))
    return KnowledgeError(grpc.aio.AioRpcError(code, grpc.aio.Metadata(), trailers, details=message))


def property_names(schema: Any) -> Iterator[str]:
    """Every property name anywhere in a JSON schema (nested objects and $defs included)."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "properties" and isinstance(value, dict):
                yield from value
            yield from property_names(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from property_names(item)


def reach_arguments(schema: dict) -> list[str]:
    return [name for name in property_names(schema) if any(word in name.lower() for word in REACH_WORDS)]


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")


def assert_ok(result: Any, output_schema: dict | None) -> dict:
    """An Ok: not an error, text beside it, structured content that follows the output schema."""
    assert not result.is_error, text_of(result)
    assert text_of(result).strip()
    assert output_schema is not None and result.structured_content is not None
    jsonschema.validate(result.structured_content, output_schema)
    return result.structured_content


def assert_hint(result: Any) -> dict:
    assert result.is_error, text_of(result)
    assert text_of(result).startswith("Hint: "), text_of(result)
    assert "Traceback" not in text_of(result)
    assert result.structured_content["outcome"] == "hint"
    return result.structured_content


def assert_err(result: Any, reason: str) -> dict:
    assert result.is_error, text_of(result)
    assert text_of(result).startswith(f"Error {reason}: "), text_of(result)
    assert "Traceback" not in text_of(result)
    assert result.structured_content == {**result.structured_content, "outcome": "error", "reason": reason}
    return result.structured_content


class FakeServices:
    """Answers as the services would for one small tenant; records the token of every call."""

    def __init__(self) -> None:
        self.tokens: list[str | None] = []
        self.fail: dict[str, Exception] = {}  # method name -> what it raises
        self.corpora_list = [
            ingest_pb2.Corpus(corpus_id="1", name="Handbook", document_count=2, chunk_count=9),
            ingest_pb2.Corpus(corpus_id="2", name="Contracts", document_count=1, chunk_count=4),
        ]
        self.documents_by_corpus = {
            "1": [
                ingest_pb2.Document(document_id="11", corpus_id="1", filename="vacation-policy.md"),
                ingest_pb2.Document(document_id="12", corpus_id="1", filename="expenses.md"),
            ],
            "2": [ingest_pb2.Document(document_id="21", corpus_id="2", filename="lease.pdf")],
        }
        self.job_polls = 0

    def _called(self, name: str) -> None:
        self.tokens.append(current_token())
        if name in self.fail:
            raise self.fail[name]

    async def search_documents(self, request: search_pb2.SearchDocumentsRequest) -> search_pb2.SearchDocumentsResponse:
        self._called("search_documents")
        hit = search_pb2.SearchResult(
            document_id="11", filename="vacation-policy.md", corpus_id="1", chunk_id="5", content="30 days.", score=0.7
        )
        text = "Relevance: HIGH - ...\n\n[Source 1 (document_id=11), relevance: 70%, vec#1/lex#1]\n30 days.\n"
        return search_pb2.SearchDocumentsResponse(
            text=text, relevance=search_pb2.RELEVANCE_HIGH, result_count=1, synthesis="30 days [1].", results=[hit]
        )

    async def context(self, request: search_pb2.GetContextRequest) -> search_pb2.GetContextResponse:
        self._called("context")
        found = search_pb2.KnowledgeContext(
            facts=[search_pb2.Fact(statement="30 days", evidence_ids=["E1"], status=search_pb2.FACT_STATUS_GROUNDED)],
            evidence=[search_pb2.Evidence(evidence_id="E1", document_id="11", excerpt="30 days.")],
            metadata=search_pb2.ContextMetadata(relevance=search_pb2.RELEVANCE_HIGH),
            rendered="[KNOWLEDGE CONTEXT]\nQuery: vacation\n",
        )
        return search_pb2.GetContextResponse(context=found)

    async def prefetch(self, user_message: str) -> search_pb2.PrefetchContextResponse:
        self._called("prefetch")
        return search_pb2.PrefetchContextResponse(rendered="[SUGGESTED CONTEXT]\n- a", entry_count=1)

    async def document_text(self, document_id: str, page: int) -> ingest_pb2.GetDocumentTextResponse:
        self._called("document_text")
        return ingest_pb2.GetDocumentTextResponse(
            document_id=document_id, text=f"page {page} text", page=page, page_count=3, next_page=page + 1
        )

    async def corpora(self) -> list[ingest_pb2.Corpus]:
        self._called("corpora")
        return list(self.corpora_list)

    async def documents(self, corpus_id: str, limit: int) -> list[ingest_pb2.Document]:
        self._called("documents")
        return self.documents_by_corpus.get(corpus_id, [])[:limit]

    async def create_corpus(self, name: str, description: str) -> ingest_pb2.Corpus:
        self._called("create_corpus")
        return ingest_pb2.Corpus(corpus_id="3", name=name, description=description)

    async def move(self, request: ingest_pb2.MoveDocumentsRequest) -> ingest_pb2.MoveDocumentsResponse:
        self._called("move")
        return ingest_pb2.MoveDocumentsResponse(
            moved_count=len(request.document_ids), moved_document_ids=list(request.document_ids)
        )

    async def ingest_text(self, request: ingest_pb2.IngestTextRequest) -> ingest_pb2.IngestTextResponse:
        self._called("ingest_text")
        return ingest_pb2.IngestTextResponse(job_id="77", corpus_id=request.corpus_id or "1", status="ingesting")

    async def job(self, job_id: str) -> ingest_pb2.IngestJob:
        self._called("job")
        self.job_polls += 1
        if self.job_polls < 2:
            return ingest_pb2.IngestJob(job_id=job_id, state=ingest_pb2.DOCUMENT_STATE_EMBEDDING, stage="embedding 1/2")
        result = ingest_pb2.IngestResult(document_id="13", chunk_count=2, message="indexed")
        return ingest_pb2.IngestJob(job_id=job_id, state=ingest_pb2.DOCUMENT_STATE_SEARCHABLE, result=result)

    async def prompt_context(self) -> ingest_pb2.GetPromptContextResponse:
        self._called("prompt_context")
        return ingest_pb2.GetPromptContextResponse(text="- Knowledge: 3 documents across 2 corpora.")

    async def classify(self, document_id: str) -> documents_ai_pb2.ClassifyDocumentResponse:
        self._called("classify")
        return documents_ai_pb2.ClassifyDocumentResponse(
            type_name="policy",
            confidence=0.9,
            decided_by="embedding",
            card=documents_ai_pb2.Card(markdown="**policy**"),
        )

    async def extract(self, document_id: str, schema_name: str, schema_version: int) -> Any:
        self._called("extract")
        value = documents_ai_pb2.ExtractedField(
            name="days", value_json="30", evidence=documents_ai_pb2.ValueEvidence(chunk_id="5", quote="30 days")
        )
        return documents_ai_pb2.ExtractDocumentResponse(fields=[value], schema_name=schema_name, schema_version=1)

    async def process(self, document_id: str) -> documents_ai_pb2.ProcessDocumentResponse:
        self._called("process")
        table = documents_ai_pb2.ExtractedTable(
            title="Rates", columns=[documents_ai_pb2.TableColumn(name="a")], rows_json=["[1]"], row_count=1
        )
        result = documents_ai_pb2.ProcessingResult(
            result_id="9", document_id=document_id, type_name="policy", confidence=0.8, tables=[table]
        )
        return documents_ai_pb2.ProcessDocumentResponse(result=result)

    async def document_types(self) -> list[documents_ai_pb2.DocumentType]:
        self._called("document_types")
        return [documents_ai_pb2.DocumentType(name="invoice", description="A bill.")]

    async def index_anchor(self, entity_type: str, entity_id: str, content: str) -> embedder_pb2.IndexResponse:
        self._called("index_anchor")
        return embedder_pb2.IndexResponse(chunk_ids=["4"], chunk_count=1)

    async def refresh_anchor(
        self, entity_type: str, entity_id: str, content: str
    ) -> embedder_pb2.RefreshAnchorResponse:
        self._called("refresh_anchor")
        return embedder_pb2.RefreshAnchorResponse(anchor_id="4", piece_count=1)

    async def close(self) -> None:
        pass


# One call of each tool that the fake (and a real stack with these ids) answers.
def example_calls(document_id: str = "11", corpus_id: str = "1") -> dict[str, dict[str, Any]]:
    return {
        "search_documents": {"query": "vacation days"},
        "get_document_text": {"document_id": document_id},
        "create_corpus": {"name": "New collection"},
        "list_corpora": {},
        "move_documents": {"target_corpus_id": corpus_id, "document_ids": [document_id]},
        "classify_document": {"document_id": document_id},
        "extract_document": {"document_id": document_id},
        "process_document": {"document_id": document_id},
        "index_content": {"kind": "chunks", "content": "# Note\n\nParking is free on Fridays.", "corpus_id": corpus_id},
        "refresh_anchor": {"entity_type": "tool", "entity_id": "calculator", "content": "adds numbers"},
        "get_context": {"query": "vacation days"},
        "prefetch_context": {"user_message": "how many vacation days do I have?"},
    }
