"""Passages by reference: index a version, remove a reference, check an index's admission.

Every refusal comes before anything is stored, in this order: the request's shape (400), the
tenant's plan (PLAN_REQUIRED), the corpus (404 out of reach, 403 an ancestor's), whether the
version changes anything (unchanged: answered at once, nothing written), the quotas
(QUOTA_EXHAUSTED naming one); only then is a corpus created for an unknown key, the passages
stored as a blob in content-index and the version admitted (``PostgresPassages.admit``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, replace

import structlog
from knowledge_runtime.auth import Scope
from knowledge_runtime.errors import UploadTooLarge
from knowledge_runtime.refusals import Refused
from knowledge_runtime.tenancy import PLATFORM_INDEX

from knowledge_ingest.corpora.usecases import CorpusUseCases
from knowledge_ingest.documents.access import change_access, given_list
from knowledge_ingest.domain.documents import Job, State, safe_filename
from knowledge_ingest.domain.errors import DocumentRefNotFound, InvalidRequest
from knowledge_ingest.domain.passages import (
    MAX_PASSAGES,
    PASSAGES_MIME,
    Admitted,
    IndexRequest,
    Outcome,
    ReferencedDocument,
    admit_version,
    check_reference,
    check_request,
    encode,
)
from knowledge_ingest.domain.ports import (
    AccessStore,
    BlobStore,
    CorpusKinds,
    PassageRepository,
    ReachSource,
    TombstoneRepository,
)
from knowledge_ingest.domain.tombstones import Tombstone, reason_of
from knowledge_ingest.guards import corpus_named, require_readable, require_writable, required_corpus
from knowledge_ingest.tenants.usecases import QuotaChecks

log = structlog.get_logger("knowledge.ingest.passages")
REMOVED_BY_REFERENCE = "removed by reference"


@dataclass(frozen=True)
class Indexed:
    corpus_id: int
    corpus_created: bool
    document_id: int
    unchanged: bool
    job: Job | None  # None when unchanged

    @property
    def state(self) -> State:
        return State.SEARCHABLE if self.job is None else self.job.state


@dataclass(frozen=True)
class Removed:
    removed: int  # searchable versions removed: 1, or 0
    tombstone: Tombstone | None
    cancelled_job_id: str | None


@dataclass(frozen=True)
class Checked:
    corpus_id: int
    refusal: Refused | None  # None: admitted


async def _one(data: bytes) -> AsyncIterator[bytes]:
    yield data


@dataclass
class PassageUseCases:
    passages: PassageRepository
    corpora: CorpusUseCases
    reach: ReachSource
    kinds: CorpusKinds
    blobs: BlobStore
    tombstones: TombstoneRepository
    quotas: QuotaChecks
    max_upload_bytes: int
    access: AccessStore

    async def index(
        self,
        scope: Scope,
        corpus_id: str,
        corpus_key: str,
        document_ref: str,
        content_sha256: str,
        title: str,
        metadata: Mapping[str, object],
        passages: Sequence[tuple[str, str, Mapping[str, object]]],
        confidentiality: str = "",
        principals: Sequence[str] | None = None,
    ) -> Indexed:
        """``principals``: the request's AccessList (None: none given): a new document's list, or
        a known reference's new list at once (documents.access)."""
        request = replace(
            check_request(document_ref, content_sha256, title, metadata, passages),
            principals=given_list(principals, "access.principals"),
        )
        await self.quotas.require_plan(scope.tenant, PLATFORM_INDEX)
        reach = await self.reach.reach_of(scope)
        known = await corpus_named(self.reach, scope, reach, corpus_id, corpus_key)
        if known is None and not corpus_key:
            raise InvalidRequest("corpus_id (or corpus_key) is required", field="corpus_id")
        existing = None
        if known is not None:
            await require_writable(self.kinds, scope, reach, known, corpus_key or corpus_id)
            existing = await self.passages.referenced(scope.tenant, known, request.document_ref)
            if existing is not None and not reach.reader.may_read_document(existing.principals):
                raise DocumentRefNotFound(request.document_ref)  # one reference, one document: never a second
            if existing is not None and request.principals is not None:
                await change_access(self.access, scope, existing.document_id, existing.principals, request.principals)
            if not admit_version(existing, request.content_sha256).creates_job:  # unchanged, or being indexed
                admitted = await self.passages.admit(scope.tenant, known, request, None)
                if admitted is not None:
                    return _indexed(known, False, admitted)
        data = encode(request.version)
        if len(data) > self.max_upload_bytes:
            raise UploadTooLarge(self.max_upload_bytes)
        refusal = await self.quotas.index_refusal(
            scope.tenant, PLATFORM_INDEX, existing.document_id if existing else None, len(data), len(passages)
        )
        if refusal is not None:
            raise refusal
        created = False
        if known is None:  # an unknown key: the corpus is made now, at the caller's node
            known, created = await self.corpora.keyed_or_created(scope, corpus_key, confidentiality)
            await require_writable(self.kinds, scope, await self.reach.reach_of(scope), known, corpus_key)
        return await self._admit(scope, known, created, request, data)

    async def _admit(self, scope: Scope, corpus_id: int, created: bool, request: IndexRequest, data: bytes) -> Indexed:
        blob = await self.blobs.write(scope.tenant, safe_filename(request.filename), PASSAGES_MIME, _one(data))
        admitted = await self.passages.admit(scope.tenant, corpus_id, request, blob)
        assert admitted is not None  # given a blob, admission always answers
        log.info(
            "passages_admitted",
            corpus_id=corpus_id,
            document_id=admitted.document_id,
            outcome=admitted.outcome.value,
            passages=len(request.version.passages),
        )
        return _indexed(corpus_id, created, admitted)

    async def remove(self, scope: Scope, corpus_id: str, corpus_key: str, document_ref: str) -> Removed:
        """Tombstones the reference's document (the deletion path: out of every read at once, a
        job still indexing it cancelled, then removed), or nothing when it has none: idempotent."""
        check_reference(document_ref)
        reach = await self.reach.reach_of(scope)
        corpus, named = await required_corpus(self.reach, scope, reach, corpus_id, corpus_key)
        await require_writable(self.kinds, scope, reach, corpus, named)
        existing = await self.passages.referenced(scope.tenant, corpus, document_ref)
        if existing is None:
            return Removed(0, None, None)
        if not reach.reader.may_read_document(existing.principals):
            raise DocumentRefNotFound(document_ref)
        deletion = await self.tombstones.delete_document(
            scope.tenant, existing.document_id, scope.subject, reason_of("", REMOVED_BY_REFERENCE)
        )
        if deletion is None:  # removed meanwhile
            return Removed(0, None, None)
        log.info("reference_removed", corpus_id=corpus, document_id=existing.document_id)
        # Read under the deletion's lock: the chunks of the version that was searchable, if any.
        return Removed(1 if deletion.tombstone.chunk_count else 0, deletion.tombstone, deletion.cancelled_job_id)

    async def check(
        self, scope: Scope, corpus_id: str, corpus_key: str, size_bytes: int, passages: int, document_ref: str = ""
    ) -> Checked:
        """The refusal an index of ``size_bytes`` and ``passages`` would meet now (None: admitted);
        nothing is stored."""
        if size_bytes < 0:
            raise InvalidRequest("bytes must not be negative", field="bytes")
        if not 0 <= passages <= MAX_PASSAGES:
            raise InvalidRequest(f"passages must be 0 to {MAX_PASSAGES}", field="passages")
        reach = await self.reach.reach_of(scope)
        corpus, named = await required_corpus(self.reach, scope, reach, corpus_id, corpus_key)
        await require_readable(self.kinds, scope, reach, corpus, named)
        existing: ReferencedDocument | None = None
        if document_ref:
            existing = await self.passages.referenced(scope.tenant, corpus, check_reference(document_ref))
            if existing is not None and not reach.reader.may_read_document(existing.principals):
                existing = None  # as if absent: whether it exists is not the caller's to learn
        refusal = await self.quotas.index_refusal(
            scope.tenant, PLATFORM_INDEX, existing.document_id if existing else None, size_bytes, passages
        )
        return Checked(corpus, refusal)


def _indexed(corpus_id: int, created: bool, admitted: Admitted) -> Indexed:
    return Indexed(
        corpus_id=corpus_id,
        corpus_created=created,
        document_id=admitted.document_id,
        unchanged=admitted.outcome is Outcome.UNCHANGED,
        job=admitted.job,
    )
