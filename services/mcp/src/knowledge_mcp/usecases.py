"""What a tool answers when a service refused its call: a Hint the model can act on, or an Err.

A Hint says what to call instead, with what the caller can reach: the ids it may have meant, the
corpora in reach, the document types, the valid page range. Those listings are made as the
caller too, so a hint never names anything outside the token's reach; when a listing itself
fails, the hint goes without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from knowledge_client import KnowledgeError

from knowledge_mcp.domain.contract import Err, Hint, Suggestion, call, failure, is_hint
from knowledge_mcp.domain.suggestions import likely

# How far a hint looks for the documents an id may have meant: the newest corpora first.
SUGGESTION_CORPORA = 20
SUGGESTION_DOCUMENTS = 500
LISTED_CORPORA = 20  # a hint about a corpus names at most this many
FILTER_FIELDS = "metadata.<key>, document_ref, filename, mime_type, create_time, state"


class Listings(Protocol):
    """What a hint lists, as the caller (knowledge_mcp.adapters.services.Services)."""

    async def corpora(self) -> list[Any]: ...

    async def documents(self, corpus_id: str, limit: int) -> list[Any]: ...

    async def document_types(self) -> list[Any]: ...


class Explainer:
    def __init__(self, listings: Listings) -> None:
        self._listings = listings

    async def explain(self, error: KnowledgeError, asked: Mapping[str, Any]) -> Hint | Err:
        code = error.code.name
        if not is_hint(error.reason, code):
            return failure(error.reason, code, str(error), error.metadata)
        message = str(error)
        metadata = error.metadata
        if error.reason == "DOCUMENT_NOT_FOUND":
            wanted = metadata.get("document_id") or str(asked.get("document_id") or "")
            return Hint(
                f"no document {wanted!r} in your reach ({message}). It may be one of these:",
                "Call again with one of these document_id values, or find the document with search_documents.",
                await self._documents_like(wanted),
                error.reason,
            )
        if error.reason == "CORPUS_NOT_FOUND":
            wanted = metadata.get("corpus_id") or str(asked.get("corpus_id") or "")
            return Hint(
                f"no corpus {wanted!r} in your reach. The corpora you can read:",
                "Call again with one of these corpus_id values, or leave corpus_id empty for every corpus.",
                await self._corpora_like(wanted),
                error.reason,
            )
        if error.reason == "PAGE_OUT_OF_RANGE":
            count = metadata.get("page_count", "")
            document = str(asked.get("document_id") or "")
            return Hint(
                f"page {metadata.get('page', asked.get('page'))} is past the end: the document has {count} page(s).",
                f"Valid pages are 1 to {count}: {call('get_document_text', document_id=document, page=1)}.",
                reason=error.reason,
            )
        if error.reason == "FILTER_INVALID":
            return Hint(
                f"the filter is invalid at column {metadata.get('column', '0')}: {message}.",
                f"Fix the filter or leave it empty. Its fields: {FILTER_FIELDS}.",
                reason=error.reason,
            )
        if error.reason == "CORPUS_ALREADY_EXISTS":
            name = metadata.get("name") or str(asked.get("name") or "")
            existing = await self._corpora_named(name)
            return Hint(
                f"a corpus named {name!r} already exists:",
                "Use its corpus_id; do not create it again.",
                existing,
                error.reason,
            )
        if error.reason in ("DOCUMENT_TYPE_NOT_FOUND", "EXTRACTION_SCHEMA_NOT_FOUND"):
            return Hint(
                f"{message}. The document types:",
                "Call extract_document with one of these schema_name values, or leave it empty for the tables.",
                await self._types(),
                error.reason,
            )
        if error.reason == "ANCHOR_NOT_FOUND":
            entity = {k: str(asked.get(k) or "") for k in ("entity_type", "entity_id")}
            return Hint(
                f"there is no anchor {entity['entity_type']}/{entity['entity_id']} yet.",
                f"Create it first: {call('index_content', kind='anchor', **entity, content='...')}.",
                reason=error.reason,
            )
        return Hint(f"{message}.", "Correct the arguments and call again.", reason=error.reason)

    async def _documents_like(self, wanted: str) -> tuple[Suggestion, ...]:
        try:
            corpora = list(reversed(await self._listings.corpora()))[:SUGGESTION_CORPORA]
            found: list[Suggestion] = []
            for corpus in corpora:
                if len(found) >= SUGGESTION_DOCUMENTS:
                    break
                documents = await self._listings.documents(corpus.corpus_id, SUGGESTION_DOCUMENTS - len(found))
                found += [Suggestion(d.document_id, d.filename) for d in reversed(documents)]
        except KnowledgeError:
            return ()
        return likely(wanted, found)

    async def _corpora_like(self, wanted: str) -> tuple[Suggestion, ...]:
        try:
            corpora = [Suggestion(c.corpus_id, c.name) for c in await self._listings.corpora()]
        except KnowledgeError:
            return ()
        return likely(wanted, corpora, limit=LISTED_CORPORA)

    async def _corpora_named(self, name: str) -> tuple[Suggestion, ...]:
        try:
            corpora = await self._listings.corpora()
        except KnowledgeError:
            return ()
        return tuple(Suggestion(c.corpus_id, c.name) for c in corpora if c.name.strip() == name.strip())

    async def _types(self) -> tuple[Suggestion, ...]:
        try:
            kinds = await self._listings.document_types()
        except KnowledgeError:
            return ()
        return tuple(Suggestion(k.name, k.description[:120]) for k in kinds)
