"""What the use cases need from the outside world."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from knowledge_runtime.auth import Scope
from knowledge_runtime.chunking import EmbeddingWindow, TextChunk
from knowledge_runtime.filters import Node
from knowledge_runtime.reach import Band, Placement, Reach, Reader, ScopePath

from knowledge_ingest.domain.documents import Document, Job
from knowledge_ingest.domain.evaluation import EvaluationSet
from knowledge_ingest.domain.events import Event
from knowledge_ingest.domain.imports import Binding, Finding, FindingState, Mode, SeenFile
from knowledge_ingest.domain.jobs import Transition
from knowledge_ingest.domain.metadata import Metadata
from knowledge_ingest.domain.model import Corpus, NewCorpus, Page
from knowledge_ingest.domain.passages import Admitted, IndexRequest, ReferencedDocument, StoredVersion
from knowledge_ingest.domain.system_corpora import CorpusKind
from knowledge_ingest.domain.tombstones import Deletion, Removal, Tombstone
from knowledge_ingest.domain.webhooks import Delivery, Registrant, Webhook, WebhookChanges


class ReachSource(Protocol):
    """What the caller may read (runtime.reach decides; runtime.db.reach reads)."""

    async def reader(self, scope: Scope) -> Reader:
        """The caller's resolved reader; Refused(SCOPE_UNRESOLVED) when its scope does not resolve."""

    async def reach_of(self, scope: Scope) -> Reach:
        """The reader and the corpora it reaches."""

    async def keyed(self, tenant: str, key: str) -> list[Placement]:
        """Where the tenant's live corpora bearing ``key`` sit (``corpus_keys.resolve`` picks one)."""


class CorpusKinds(Protocol):
    async def corpus_kind(self, tenant: str, corpus_id: int) -> CorpusKind | None:
        """The kind of the tenant's own corpus or of a platform-wide one; None for any other."""


class CorpusRepository(Protocol):
    async def create(self, tenant: str, corpus: NewCorpus, node: ScopePath) -> Corpus:
        """Insert the corpus bound to ``node``; raises CorpusNameTaken (CorpusKeyTaken) when a
        live corpus of that node and band bears the name (the key)."""

    async def bands_named(self, tenant: str, node: ScopePath, name: str) -> list[Band]:
        """The bands of the tenant's live corpora at ``node`` named ``name``."""

    async def bands_keyed(self, tenant: str, node: ScopePath, key: str) -> list[Band]:
        """The bands of the tenant's live corpora at ``node`` bearing ``key``."""

    async def create_platform(self, tenant: str, corpus: NewCorpus) -> Corpus:
        """Insert a platform-wide corpus (no tenant, the root, GENERAL), its creation an event of
        ``tenant`` (the platform tenant); CorpusNameTaken on a duplicate platform-wide name."""

    async def list_user_corpora(
        self, tenant: str, page: Page, reachable: frozenset[int], principals: Collection[str]
    ) -> list[Corpus]:
        """The tenant's non-system corpora among ``reachable`` after ``page.after_id``, oldest
        first, at most ``page.size``; their counts of the documents ``principals`` may read."""

    async def set_default_access(
        self, tenant: str, corpus_id: int, default_principals: tuple[str, ...], principals: Collection[str]
    ) -> Corpus | None:
        """Set the tenant's own corpus's default access list (its counts of the documents
        ``principals`` may read); None when the tenant has no such corpus (a system one included)."""

    async def bind(self, tenant: str, corpus_id: int, node: ScopePath, principals: Collection[str]) -> Corpus | None:
        """Bind the tenant's own corpus to ``node``, creating the node and its ancestors (its counts
        of the documents ``principals`` may read); None
        when the tenant has no such corpus (a system corpus included); CorpusNameTaken when a
        live corpus of that node and band bears its name."""


@dataclass(frozen=True, slots=True)
class StoredBlob:
    blob_id: int
    size_bytes: int
    already_existed: bool


class BlobStore(Protocol):
    """The content-index service: the only owner of blobs."""

    async def write(self, tenant: str, filename: str, mime_type: str, chunks: AsyncIterator[bytes]) -> StoredBlob: ...

    async def read_to(self, tenant: str, blob_id: int, target: Path) -> int:
        """Copy the blob's bytes into ``target``; returns the size."""

    def kept(self, tenant: str, blob_id: int) -> bytes | None:
        """The blob's bytes when this process wrote it moments ago and kept them (a small one,
        ``adapters/kept_blobs.py``), handed out once; else None, and ``read_to`` reads it."""


class FetchAdmission(Protocol):
    """Admitting a page a job fetched (``adapters/jobs.py``)."""

    async def admit_fetched(
        self, job: Job, owner: str, blob: StoredBlob, filename: str, mime_type: str, source_url: str
    ) -> Job | None: ...


class FileImporter(Protocol):
    """Content-index's ImportFile: it reads a file under an import root (fenced on its side too)
    into a blob."""

    async def import_file(self, tenant: str, path: str, mime_type: str) -> StoredBlob: ...


class ImportRepository(Protocol):
    """Import bindings and change findings (``adapters/imports.py``)."""

    async def set_binding(self, tenant: str, corpus_id: int, root_name: str, mode: Mode, set_by: str) -> Binding: ...

    async def bindings(self, tenant: str, corpus_id: int) -> list[Binding]: ...

    async def claim_due_bindings(self, interval_s: float) -> list[Binding]: ...

    async def record(
        self,
        tenant: str,
        corpus_id: int,
        root_name: str,
        seen: SeenFile,
        *,
        state: FindingState = FindingState.OPEN,
        job_id: uuid.UUID | None = None,
        decided_by: str | None = None,
    ) -> Finding | None: ...

    async def findings(
        self, tenant: str, corpus_id: int, state: FindingState | None, page: Page
    ) -> tuple[list[Finding], int | None]: ...

    async def finding(self, tenant: str, finding_id: int) -> Finding | None: ...

    async def decide(
        self, tenant: str, finding_id: int, state: FindingState, job_id: uuid.UUID | None, decided_by: str
    ) -> Finding | None: ...


class Embedder(Protocol):
    """The embedder service: the only holder of the model."""

    async def window(self, tenant: str) -> EmbeddingWindow:
        """The model's window and the tokenizer to count it in (read from the embedder, kept)."""

    async def embed(self, tenant: str, texts: Sequence[str], tokenizer: str = "") -> list[list[float]]:
        """One vector per text. ``tokenizer``: the id of the tokenizer the texts were sized with
        (``EmbeddingWindow.tokenizer_id``), if any; when the embedder's is another, nothing is
        embedded and DependencyNotReady says the embedder changed (the job runs again)."""


class Readiness(Protocol):
    """Whether the services a job needs (content-index, embedder) can answer now."""

    async def wait_ready(self) -> None:
        """Return once every one of them is ready (its connection is up); wait meanwhile."""

    def waiting_for(self) -> list[str]:
        """The services not ready at this moment (empty when all are)."""


@dataclass(frozen=True, slots=True)
class Lease:
    """A worker's claim on a job; every write of the worker is conditioned on it."""

    job: Job
    owner: str


class AccessStore(Protocol):
    async def set_access(
        self, tenant: str, document_id: int, principals: tuple[str, ...], changed_by: str
    ) -> tuple[str, ...] | None:
        """Make ``principals`` the live document's access list, with a record of the change (who,
        when, old and new lists) and its ``document.access_changed`` event, in one transaction
        (nothing written when the list is that already); the list it had, None when the tenant
        has no such live document."""


class DocumentRepository(Protocol):
    """Documents and their chunks as the API reads and changes them (role knowledge_ingest)."""

    async def corpus_kind(self, tenant: str, corpus_id: int) -> CorpusKind | None:
        """The kind of the tenant's own corpus or of a platform-wide one; None for any other."""

    # ``owners``: the tenant keys whose rows may be read (Reach.owners: the caller's tenant, and
    # the platform tenant's when the caller reaches a platform-wide corpus). ``principals``: the
    # caller's (Reader.principals); a document whose access list does not admit them is absent to
    # every method that takes them, as one that does not exist (runtime.reach.may_read_document).
    async def document(
        self, owners: Sequence[str], document_id: int, principals: Collection[str] | None
    ) -> Document | None:
        """``principals`` None: the service's own read (a worker's, no caller), whatever the list."""

    async def documents(
        self,
        owners: Sequence[str],
        document_ids: Sequence[int],
        principals: Collection[str],
        condition: Node | None = None,
    ) -> list[Document]:
        """The owners' documents among ``document_ids`` (no duplicates) that ``condition`` (a
        request's filter) holds for, in that order."""

    async def list_documents(
        self,
        owners: Sequence[str],
        corpus_id: int,
        page: Page,
        principals: Collection[str],
        condition: Node | None = None,
    ) -> list[Document]:
        """A page of the corpus's documents that ``condition`` holds for; FilterInvalid for a
        field or operator it cannot read."""

    async def document_chunks(
        self, owners: Sequence[str], document_id: int, principals: Collection[str]
    ) -> list[TextChunk]: ...

    async def movable_documents(
        self, tenant: str, source_corpus_id: int | None, reachable: frozenset[int], principals: Collection[str]
    ) -> list[int]: ...

    async def move(
        self,
        tenant: str,
        target_corpus_id: int,
        document_ids: Sequence[int],
        source_corpus_id: int | None,
        reachable: frozenset[int],
        principals: Collection[str],
    ) -> tuple[list[int], list[int], list[int]]:
        """(moved, missing, outside the source): nothing moves unless every document is the
        tenant's, in a corpus among ``reachable`` and readable by ``principals`` (else missing)
        and, when a source is given, in it."""

    async def move_all(
        self, tenant: str, source_corpus_id: int, target_corpus_id: int, listed: int, principals: Collection[str]
    ) -> tuple[int, list[int]]:
        """Every document of the source that ``principals`` may read, in one transaction: (how
        many, the first ``listed`` ids)."""

    async def update_document(
        self, tenant: str, document_id: int, metadata: Metadata | None, filename: str | None
    ) -> bool:
        """Set what is not None (metadata replaced whole) and merge the chunks' metadata again in
        the same transaction; False when the tenant has no such live document."""

    async def set_access(
        self, tenant: str, document_id: int, principals: tuple[str, ...], changed_by: str
    ) -> tuple[str, ...] | None:
        """As ``AccessStore.set_access``."""

    async def housekeeping_corpus(self, tenant: str, name: str) -> int | None:
        """The tenant's housekeeping corpus ``name`` (at the root, in the default band), created
        when missing; None when a corpus of the tenant's own there already bears the name."""

    async def set_subject(self, tenant: str, document_id: int, subject: str) -> None:
        """Records whom a housekeeping entry is about."""

    async def corpus_summary(self, tenant: str, principals: Collection[str]) -> list[tuple[int, str, int]]:
        """(corpus_id, name, searchable documents ``principals`` may read, housekeeping files left
        out) of the tenant's user corpora."""


class JobRepository(Protocol):
    """Jobs as the API creates and changes them; each change is a ``domain.jobs``/``admission``
    decision taken under the rows' locks."""

    async def enqueue(
        self,
        tenant: str,
        corpus_id: int,
        blob: StoredBlob,
        filename: str,
        mime_type: str,
        source_url: str | None,
        metadata: Metadata | None = None,
        principals: tuple[str, ...] | None = None,
    ) -> Job:
        """Create the job (and the document, unless the tenant already has one on this blob): ``admit``.
        ``metadata``: the document's, when the job makes it (or extracts it again); ``principals``:
        its access list when the job makes it (None: the corpus's default; a duplicate keeps its own)."""

    async def enqueue_fetch(self, tenant: str, corpus_id: int, url: str, filename: str) -> Job:
        """A job whose first stage fetches ``url``."""

    async def enqueue_into(
        self,
        tenant: str,
        document_id: int,
        corpus_id: int | None,
        blob: StoredBlob,
        mime_type: str,
        source_url: str | None,
        metadata: Metadata | None = None,
    ) -> Job | None:
        """Create a job that makes ``blob`` the content of the tenant's document (None: no such
        document), with ``metadata`` as its metadata when given; raises what ``admit_into`` raises."""

    async def job(
        self, tenant: str, job_id: uuid.UUID, principals: Collection[str], *, deliver_result: bool
    ) -> Job | None:
        """The tenant's job, unless its document's access list does not admit ``principals``
        (then None, and its result is not delivered)."""

    async def cancel(self, tenant: str, job_id: uuid.UUID) -> Job | None:
        """Apply ``cancel_request``; the job after it (None: not the tenant's)."""

    async def retry(self, tenant: str, job_id: uuid.UUID) -> Job | None:
        """Apply ``retry_request`` (which may raise); the job after it (None: not the tenant's)."""


class JobQueue(Protocol):
    """The workers' side: claims under a lease, and writes conditioned on still holding it (and the
    job being unended), so a job taken over after its worker died is never written twice."""

    async def claim(self, owner: str, lease_s: float) -> Lease | None: ...

    async def apply(self, lease: Lease, transition: Transition, lease_s: float) -> bool:
        """Write the transition (and its document effect); False when the lease was lost, the job
        ended, or, for a transition ``unless_cancelled``, cancel was asked."""

    async def store(
        self,
        lease: Lease,
        chunks: Sequence[TextChunk],
        vectors: Sequence[Sequence[float]] | Sequence[None],
        transition: Transition,
        version: StoredVersion | None = None,
        extracted: Mapping[str, str] | None = None,
        next_vectors: Sequence[Sequence[float]] | None = None,
    ) -> bool:
        """The chunks replace the document's and the transition is written, in one transaction;
        with a passages ``version``, the document's title, metadata, hash and blob change with them.
        ``extracted``: what the file says of itself, added to the document's metadata as
        ``metadata.with_extracted`` decides (before its chunks take the document's metadata);
        ``next_vectors``: the next store's (a model change), written with them."""

    async def renew(self, lease: Lease, lease_s: float) -> bool:
        """Extend the lease; False when it was lost or cancel was asked."""

    async def cancel_requested(self, lease: Lease) -> bool:
        """The job is still this lease's, unended, and cancel was asked of it."""

    async def reap_cancelled(self) -> int:
        """End cancel-requested jobs whose worker is gone (lease expired); how many were ended."""

    async def backlog(self) -> int:
        """Jobs of every tenant not yet ended: what the autoscaler scales ingest on."""


class PassageRepository(Protocol):
    """References and the admission of their versions (``passages/postgres.py``)."""

    async def referenced(self, tenant: str, corpus_id: int, document_ref: str) -> ReferencedDocument | None:
        """The reference's live document with its unfinished jobs, as read now."""

    async def admit(
        self, tenant: str, corpus_id: int, request: IndexRequest, blob: StoredBlob | None
    ) -> Admitted | None:
        """``admit_version`` decided and written in one transaction under the reference's lock;
        None when it needs a job and ``blob`` is None (nothing written)."""


class DocumentSubscription(Protocol):
    async def next(self) -> list[int]:
        """The documents announced since the last call, each once; waits for an announcement,
        which may name no document when the corpus itself changed (bound elsewhere, another
        band, deleted). Raises Unavailable when the announcements stopped (the database went away)."""


class DocumentFeed(Protocol):
    """Committed changes of documents, as the database announces them (no polling)."""

    def subscribe(self, corpus_id: int) -> AbstractAsyncContextManager[DocumentSubscription]:
        """Listening from the moment it is entered: what a read after that misses, it announces.
        Every change of the corpus's documents, whoever's rows (a platform corpus's are the
        platform tenant's): the caller's reach was checked, and its reads decide what it is told."""


class EventLog(Protocol):
    """The tenant's events as the outbox committed them (``adapters.outbox``)."""

    async def read_after(self, tenant: str, after: int, limit: int) -> list[Event]:
        """Events with seq > ``after`` in seq order, at most ``limit``, each with its corpus's
        placement as of this read (the corpus row now; the one recorded at write time once the
        corpus is gone)."""

    async def bounds(self, tenant: str) -> tuple[int, int]:
        """(oldest retained seq, or head + 1 when none is; newest seq, 0 when none)."""

    async def prune(self, retention_s: float) -> int:
        """Remove every tenant's events older than the retention (a prefix of its sequence)."""


class Wakeup(Protocol):
    def clear(self) -> None: ...

    async def wait(self, timeout_s: float) -> bool:
        """True when the tenant may have new events, False when the timeout passed first."""


class EventWakeups(Protocol):
    """Wakes the watchers of a tenant when its events commit (LISTEN/NOTIFY)."""

    def subscribe(self, tenant: str) -> AbstractContextManager[Wakeup]: ...


class JobWakeups(Protocol):
    """Wakes idle workers when a job is queued (LISTEN/NOTIFY), so a new job waits for no poll."""

    def jobs(self) -> AbstractContextManager[Wakeup]: ...


class TombstoneRepository(Protocol):
    """Deletions (one transaction each: invisible, tombstoned, evented), their removal jobs, and
    the tombstones' retention."""

    async def delete_document(self, tenant: str, document_id: int, subject: str, reason: str) -> Deletion | None:
        """None when the tenant has no such live document."""

    async def delete_corpus(
        self, tenant: str, corpus_id: int, subject: str, reason: str, with_documents: bool
    ) -> list[Tombstone] | int | None:
        """Its documents' tombstones; None: no such live corpus; an int: its live documents, nothing changed."""

    async def list_tombstones(self, tenant: str, corpus_id: int | None, page: Page) -> list[Tombstone]:
        """The tenant's tombstones (of one corpus when given) after ``page.after_id``, oldest first."""

    async def claim(self, owner: str, lease_s: float) -> Removal | None: ...

    async def remove_batch(self, removal: Removal, batch: int, lease_s: float) -> int | None:
        """Chunks deleted (0: none left); None when the lease is no longer held."""

    async def finish(self, removal: Removal, lease_s: float) -> bool:
        """The document row (and its deleted, empty corpus) removed; False when the lease is lost."""

    async def failed(self, removal: Removal, retry_after_s: float, error: str) -> None: ...

    async def prune(self, retention_s: float) -> int:
        """Remove the tombstones of completed removals older than the retention."""


class WebhookStore(Protocol):
    """Webhooks as the API changes them (``webhooks.postgres``). Every change bumps the webhook's
    version, so a delivery under way stops at its next write; None: no such webhook."""

    async def create(
        self,
        tenant: str,
        url: str,
        event_types: tuple[str, ...],
        description: str,
        registrant: Registrant,
        sealed_secret: str,
        limit: int,
    ) -> Webhook | None:
        """Registered, sent the events committed from now on; None when the tenant has ``limit``."""

    async def of_tenant(self, tenant: str) -> list[Webhook]:
        """Every webhook of the tenant, oldest first (at most MAX_WEBHOOKS_PER_TENANT)."""

    async def get(self, tenant: str, webhook_id: int) -> Webhook | None: ...

    async def update(self, tenant: str, webhook_id: int, changes: WebhookChanges) -> Webhook | None:
        """ACTIVE on a disabled webhook enables it again, its next attempt due at once."""

    async def delete(self, tenant: str, webhook_id: int) -> bool: ...

    async def rotate(self, tenant: str, webhook_id: int, sealed_secret: str, grace_s: int) -> Webhook | None:
        """The new secret signs; the one it replaces signs beside it for ``grace_s``."""

    async def replay(self, tenant: str, webhook_id: int, cursor: int) -> Webhook | None:
        """Delivery goes on after ``cursor``, with no failure counted."""

    async def deliveries(self, webhook_id: int, page: Page) -> list[Delivery]:
        """Attempts newest first, older than ``page.after_id`` (0: from the newest)."""


class SecretSealer(Protocol):
    """Signing secrets sealed for storage under a key kept outside the database."""

    def seal(self, tenant: str, url: str, secret: str) -> str: ...

    def open(self, tenant: str, url: str, sealed: str) -> str:
        """ValueError when it was not sealed for this tenant and URL under this key."""


class TargetFence(Protocol):
    async def check(self, url: str) -> None:
        """UrlRefused / FetchFailed unless the URL's host resolves, now, to an address outside the
        fence (or an allowed host)."""


class HeldModels(Protocol):
    """The models the embedder holds, and embedding with one of them by name."""

    async def held(self, tenant: str) -> list[tuple[str, int]]:
        """(model id, dimension) of each model the embedder holds, the current one first."""

    async def embed_with(self, tenant: str, texts: Sequence[str], model: str) -> list[list[float]]:
        """One vector per text, by ``model`` ('' = the current one)."""


class SetSearch(Protocol):
    """Search, as a model change's evaluation asks it."""

    async def ranked(
        self, evaluation_set: EvaluationSet, text: str, mode: str, candidate: bool, top_k: int
    ) -> list[str]:
        """The document ids of the chunks that answer ``text`` in the set's corpus (best first),
        in ``mode``, from the current model's vectors or the open change's other model's."""
