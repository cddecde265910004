"""What document AI's use cases need from the world; adapters implement these."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from knowledge_runtime.auth import Scope
from knowledge_runtime.costs import CostItem
from knowledge_runtime.llm import ChatReply
from knowledge_runtime.refusals import Refused

from knowledge_documents_ai.domain.model import ProcessingResult, StoredSchema, StoredType
from knowledge_documents_ai.domain.processing import DocumentContent
from knowledge_documents_ai.domain.taxonomy import DocumentType


class Taxonomy(Protocol):
    async def types(self, tenant: str, *, include_retired: bool = False) -> list[StoredType]: ...

    async def get_type(self, tenant: str, name: str) -> StoredType | None: ...

    async def add_type(
        self, tenant: str, kind: DocumentType, *, origin: str, proposed_for: int | None = None
    ) -> StoredType:
        """TypeExists when the tenant has a type of that name."""
        ...

    async def set_retired(self, tenant: str, name: str, retired: bool, by: str) -> StoredType | None: ...

    async def schemas(self, tenant: str, type_name: str) -> list[StoredSchema]:
        """Newest first."""
        ...

    async def add_schema(
        self, tenant: str, type_name: str, json_schema: Mapping[str, Any], *, added_by: str, origin: str
    ) -> StoredSchema:
        """The next version (1 for the first)."""
        ...


class Documents(Protocol):
    async def visible(self, scope: Scope, document_id: int) -> None:
        """DocumentNotFound when the document is absent, another tenant's or out of reach; reads
        nothing else (its state and chunks do not matter)."""
        ...

    async def content(self, scope: Scope, document_id: int) -> DocumentContent:
        """The document's chunks, or DocumentNotFound (absent, another tenant's, out of reach),
        or Refused(INDEXING) while it is being ingested."""
        ...


class Anchors(Protocol):
    async def index_type(self, tenant: str, kind: DocumentType) -> None: ...

    async def scores(self, tenant: str, text: str, top_k: int) -> dict[str, float]:
        """Type name -> cosine of ``text`` to the type's anchor, for the nearest ``top_k``."""
        ...


class ChatModel(Protocol):
    model: str

    async def complete(
        self, messages: Sequence[Mapping[str, str]], *, max_tokens: int = ..., json_object: bool = False
    ) -> ChatReply: ...


class CostLedger(Protocol):
    async def record(self, tenant: str, item: CostItem) -> None: ...


class LlmBudget(Protocol):
    async def refusal(self, tenant: str) -> Refused | None:
        """BUDGET_EXHAUSTED when the tenant's LLM spend this month has reached its budget."""
        ...


class Results(Protocol):
    async def find(
        self, tenant: str, document_id: int, content_hash: str, type_name: str, schema_version: int
    ) -> ProcessingResult | None:
        """The stored result of this content processed as this type with this schema version
        (versions count within a type, so the type is part of the key)."""
        ...

    async def add(self, tenant: str, result: ProcessingResult) -> tuple[ProcessingResult, bool]:
        """The stored result and whether an identical one existed (then it is answered instead)."""
        ...

    async def page(self, tenant: str, document_id: int, after_id: int | None, limit: int) -> list[ProcessingResult]:
        """Newest first, ids below ``after_id``."""
        ...
