"""Uploads and text ingestion: safe name, capped stream, corpus check, blob, then the job."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field

from knowledge_runtime.auth import Scope
from knowledge_runtime.errors import DomainError, UploadTooLarge
from knowledge_runtime.reach import Reach

from knowledge_ingest.documents.access import change_access, given_list
from knowledge_ingest.domain.documents import Job, parse_id, safe_filename
from knowledge_ingest.domain.errors import CorpusNotFound, DocumentNotFound, InvalidRequest
from knowledge_ingest.domain.metadata import Metadata, check_metadata
from knowledge_ingest.domain.ports import BlobStore, DocumentRepository, JobRepository, ReachSource
from knowledge_ingest.domain.system_corpora import housekeeping_target
from knowledge_ingest.guards import require_writable
from knowledge_ingest.tenants.usecases import QuotaChecks

MAX_TITLE_CHARS = 1000
MAX_BATCH_ITEMS = 1000  # texts per IngestTexts / BatchIngestTexts call
BATCH_CONCURRENCY = 16  # items of one batch stored and queued at the same time
TEXT_MIME_TYPE = "text/plain; charset=utf-8"
FILENAME_TITLE_CHARS = 200


@dataclass(frozen=True)
class UploadSource:
    """An upload as the API layer hands it over: what it claims, then its bytes as they arrive."""

    corpus_id: str
    filename: str
    mime_type: str
    chunks: AsyncIterator[bytes]
    source_url: str | None = None
    metadata: Mapping[str, object] = field(default_factory=dict)  # the document's (domain.metadata)
    # Who may read the document the upload makes (documents.access); None: the corpus's default.
    principals: Sequence[str] | None = None


@dataclass(frozen=True)
class TextItem:
    """One text of a batch, as IngestText takes it."""

    corpus_id: str
    text: str
    title: str = ""
    source_url: str = ""
    document_id: str = ""
    metadata: Mapping[str, object] = field(default_factory=dict)
    principals: Sequence[str] | None = None  # its AccessList; None: none given


@dataclass(frozen=True)
class ItemOutcome:
    """A batch item's own answer: its job, or why it was rejected (nothing stored for it)."""

    index: int
    job: Job | None = None
    error: DomainError | None = None


async def capped(chunks: AsyncIterator[bytes], limit: int) -> AsyncIterator[bytes]:
    """The stream, failing as soon as it crosses ``limit`` bytes (never read whole)."""
    seen = 0
    async for chunk in chunks:
        seen += len(chunk)
        if seen > limit:
            raise UploadTooLarge(limit)
        yield chunk


async def _one(data: bytes) -> AsyncIterator[bytes]:
    yield data


@dataclass
class UploadUseCases:
    documents: DocumentRepository
    jobs: JobRepository
    blobs: BlobStore
    max_upload_bytes: int
    reach: ReachSource
    quotas: QuotaChecks | None = None  # None: no quotas (tests of the upload path alone)

    async def upload(self, scope: Scope, source: UploadSource, reach: Reach | None = None) -> Job:
        """``reach``: the caller's, when already computed for this request (a batch)."""
        filename = safe_filename(source.filename)  # 1. a safe name, whatever the client sent
        metadata = check_metadata(source.metadata)
        principals = given_list(source.principals, "access.principals")
        corpus_id = parse_id(source.corpus_id, "corpus_id")
        reach = reach or await self.reach.reach_of(scope)
        await require_writable(self.documents, scope, reach, corpus_id, source.corpus_id)  # 3. before any write
        if self.quotas is not None:  # QUOTA_EXHAUSTED before any byte is stored
            await self.quotas.before_upload(scope.tenant)
        # 2 + 4: the capped stream goes straight to content-index, never whole in memory.
        blob = await self.blobs.write(
            scope.tenant, filename, source.mime_type, capped(source.chunks, self.max_upload_bytes)
        )
        return await self.jobs.enqueue(
            scope.tenant, corpus_id, blob, filename, source.mime_type, source.source_url, metadata, principals
        )

    async def ingest_text(
        self,
        scope: Scope,
        corpus_id: str,
        text: str,
        title: str,
        source_url: str,
        document_id: str = "",
        reach: Reach | None = None,
        metadata: Mapping[str, object] | None = None,
        principals: Sequence[str] | None = None,
    ) -> Job:
        """The web-page path: the text is a blob like any upload, so dedup works on its hash. With
        ``document_id`` the text becomes that document's content (its chunks replaced), and a list
        given (``principals``) becomes its access list at once (documents.access)."""
        if not text.strip():
            raise InvalidRequest("text must not be empty", field="text")
        checked = check_metadata(metadata or {})
        given = given_list(principals, "access.principals")
        data = text.encode("utf-8")
        if len(data) > self.max_upload_bytes:
            raise UploadTooLarge(self.max_upload_bytes)
        if len(title) > MAX_TITLE_CHARS:
            raise InvalidRequest(f"title must be at most {MAX_TITLE_CHARS} characters", field="title")
        reach = reach or await self.reach.reach_of(scope)
        if document_id:
            return await self._ingest_into(scope, document_id, corpus_id, data, source_url, reach, checked, given)
        # the filename keeps the first 200 characters (sanitised further by safe_filename)
        name = (title.strip() or source_url.strip() or "text")[:FILENAME_TITLE_CHARS]
        filename = name if name.lower().endswith((".txt", ".md")) else f"{name}.txt"
        source = UploadSource(corpus_id, filename, TEXT_MIME_TYPE, _one(data), source_url or None, checked, given)
        return await self.upload(scope, source, reach)

    async def ingest_housekeeping(
        self, scope: Scope, system_corpus: str, text: str, title: str, about_subject: str = ""
    ) -> Job:
        """A platform service's entry in one of the tenant's housekeeping corpora (created on demand)."""
        name = housekeeping_target(system_corpus, about_subject, capabilities=scope.capabilities)
        corpus_id = await self.documents.housekeeping_corpus(scope.tenant, name)
        if corpus_id is None:
            raise InvalidRequest(
                f"a corpus of the tenant's own is named {name!r}: rename it to use the {name} system corpus",
                field="system_corpus",
                reason="SYSTEM_CORPUS_NAME_TAKEN",
            )
        job = await self.ingest_text(scope, str(corpus_id), text, title, "")
        if about_subject and job.document_id is not None:
            await self.documents.set_subject(scope.tenant, job.document_id, about_subject)
        return job

    async def _ingest_into(
        self,
        scope: Scope,
        document_id: str,
        corpus_id: str,
        data: bytes,
        source_url: str,
        reach: Reach,
        metadata: Metadata,
        principals: tuple[str, ...] | None,
    ) -> Job:
        key = parse_id(document_id, "document_id")
        corpus = parse_id(corpus_id, "corpus_id") if corpus_id else None
        if corpus is not None and not reach.has(corpus):
            raise CorpusNotFound(corpus_id)
        document = await self.documents.document(reach.owners(scope.tenant), key, reach.reader.principals)
        if document is None or not reach.has(document.corpus_id):  # before any write; checked again under the lock
            raise DocumentNotFound(document_id)
        await require_writable(self.documents, scope, reach, document.corpus_id, str(document.corpus_id))
        if corpus is not None:
            await require_writable(self.documents, scope, reach, corpus, corpus_id)
        if principals is not None:  # who reads it changes now, whatever becomes of the new text
            await change_access(self.documents, scope, key, document.principals, principals)
        blob = await self.blobs.write(scope.tenant, document.filename, TEXT_MIME_TYPE, _one(data))
        job = await self.jobs.enqueue_into(
            scope.tenant, key, corpus, blob, TEXT_MIME_TYPE, source_url or None, metadata or None
        )
        if job is None:  # deleted meanwhile; the blob, unreferenced, goes by content-index's GC
            raise DocumentNotFound(document_id)
        return job

    async def ingest_texts(self, scope: Scope, items: Sequence[TextItem]) -> list[ItemOutcome]:
        """Many texts, each its own durable job and document (dedup as usual) with its own answer,
        in order; one item's refusal does not refuse the others."""
        if not items:
            raise InvalidRequest("items must not be empty", field="items")
        if len(items) > MAX_BATCH_ITEMS:
            raise InvalidRequest(f"at most {MAX_BATCH_ITEMS} items per call; split the batch", field="items")
        for index, item in enumerate(items):  # a malformed item refuses the batch; nothing is stored
            _check_shape(index, item)
        slots = asyncio.Semaphore(BATCH_CONCURRENCY)
        reach = await self.reach.reach_of(scope)  # once for the batch

        async def one(index: int, item: TextItem) -> ItemOutcome:
            async with slots:
                try:
                    job = await self.ingest_text(
                        scope,
                        item.corpus_id,
                        item.text,
                        item.title,
                        item.source_url,
                        item.document_id,
                        reach,
                        item.metadata,
                        item.principals,
                    )
                except DomainError as error:
                    return ItemOutcome(index, error=error)
                return ItemOutcome(index, job=job)

        return list(await asyncio.gather(*(one(i, item) for i, item in enumerate(items))))


def _check_shape(index: int, item: TextItem) -> None:
    """What a request's description already refuses (no text, a title too long, neither a corpus
    nor a document): INVALID_ARGUMENT for the whole batch, naming the item."""
    if not item.text.strip():
        raise InvalidRequest(f"items[{index}].text must not be empty", field=f"items[{index}].text")
    if len(item.title) > MAX_TITLE_CHARS:
        raise InvalidRequest(
            f"items[{index}].title must be at most {MAX_TITLE_CHARS} characters", field=f"items[{index}].title"
        )
    check_metadata(item.metadata, f"items[{index}].metadata")
    if not (item.corpus_id.strip() or item.document_id.strip()):
        raise InvalidRequest(f"items[{index}] needs a corpus_id or a document_id", field=f"items[{index}].corpus_id")
