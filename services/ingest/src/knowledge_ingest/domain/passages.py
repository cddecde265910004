"""Passages by reference: what a platform service indexes under its own name for a file.

A document here is the caller's ``(corpus, document_ref)``; its versions are the caller's content
hashes. Each passage is one retrievable unit as the caller cut it: indexed as given, never
re-chunked. The decisions are pure: the shape of a request (``check_request``), what a new
version's admission does given what the document has (``admit_version``), and what the job's
blob holds (``encode`` / ``decode``: the passages travel through content-index like any upload,
so the job is durable, retried and kill-safe as an upload's is).
"""

from __future__ import annotations

import enum
import json
import re
import unicodedata
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from knowledge_ingest.domain.documents import Job, State
from knowledge_ingest.domain.errors import InvalidRequest
from knowledge_ingest.domain.metadata import Metadata, check_metadata

MAX_PASSAGE_BYTES = 64 * 1024  # of UTF-8, one passage
MAX_PASSAGES = 10_000  # per call (the request size cap applies too)
MAX_FRAGMENT_CHARS = 200
MAX_REFERENCE_CHARS = 1024
MAX_TITLE_CHARS = 1000
PASSAGES_MIME = "application/vnd.knowledge.passages+json"  # a passages job's blob, and its document's type
PASSAGES_FORMAT = "passages"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class PassageTooLarge(InvalidRequest):
    def __init__(self, index: int, fragment: str, size: int) -> None:
        super().__init__(
            f"passages[{index}] ({fragment[:MAX_FRAGMENT_CHARS]!r}) is {size} bytes of UTF-8; a passage is at most "
            f"{MAX_PASSAGE_BYTES} (64 KiB): cut it in two",
            field=f"passages[{index}].text",
            reason="PASSAGE_TOO_LARGE",
            fragment=fragment[:MAX_FRAGMENT_CHARS],
        )


@dataclass(frozen=True, slots=True)
class Passage:
    """One retrievable unit as the caller cut it: indexed as given, never re-chunked."""

    fragment: str
    text: str
    metadata: Metadata = field(default_factory=dict)

    @property
    def page(self) -> int | None:
        """Its page: ``metadata.page`` when that is an integer (what a hit cites)."""
        page = self.metadata.get("page")
        return page if isinstance(page, int) and not isinstance(page, bool) and 0 <= page < 2**31 else None


@dataclass(frozen=True, slots=True)
class PassageSet:
    """One version of a document: what its job indexes."""

    title: str
    metadata: Metadata
    passages: tuple[Passage, ...]


@dataclass(frozen=True, slots=True)
class StoredVersion:
    """What a passages job's storing transaction writes beside the chunks: the document takes the
    version's title, metadata, hash and blob, so all of it changes with its passages, at once."""

    version: PassageSet
    content_sha256: str
    blob_id: int


@dataclass(frozen=True, slots=True)
class IndexRequest:
    """An IndexPassages request, checked (nothing is stored for one that is not)."""

    document_ref: str
    content_sha256: str
    version: PassageSet
    # Who may read the reference's document when this request makes it (checked: runtime.reach's
    # access_list); None: its corpus's default.
    principals: tuple[str, ...] | None = None

    @property
    def filename(self) -> str:
        """What the document is called: its title, else the reference's last segment."""
        return self.version.title or self.document_ref.rstrip("/").rsplit("/", 1)[-1] or self.document_ref


def check_reference(document_ref: str) -> str:
    if not document_ref:
        raise InvalidRequest("document_ref is required", field="document_ref")
    if len(document_ref) > MAX_REFERENCE_CHARS:
        raise InvalidRequest(f"document_ref is at most {MAX_REFERENCE_CHARS} characters", field="document_ref")
    if any(unicodedata.category(ch) == "Cc" for ch in document_ref):
        raise InvalidRequest("document_ref must not contain control characters", field="document_ref")
    return document_ref


def check_sha256(content_sha256: str) -> str:
    """The caller's hash of the file: 64 hex digits (lowercased)."""
    value = content_sha256.lower()
    if not _SHA256.match(value):
        raise InvalidRequest("content_sha256 is required: the file's SHA-256 as 64 hex digits", field="content_sha256")
    return value


def check_request(
    document_ref: str,
    content_sha256: str,
    title: str,
    metadata: Mapping[str, object],
    passages: Sequence[tuple[str, str, Mapping[str, object]]],
) -> IndexRequest:
    """The request's shape, every rule before anything is stored: a reference, a hash, a title of
    at most 1,000 characters, metadata within its limits, 1 to 10,000 passages, each with a
    fragment unique in the call and a text of 1 byte to 64 KiB (PASSAGE_TOO_LARGE naming it)."""
    if len(title) > MAX_TITLE_CHARS:
        raise InvalidRequest(f"title is at most {MAX_TITLE_CHARS} characters", field="title")
    if not passages:
        raise InvalidRequest("passages must hold at least one passage", field="passages")
    if len(passages) > MAX_PASSAGES:
        raise InvalidRequest(f"at most {MAX_PASSAGES} passages per call", field="passages")
    seen: set[str] = set()
    checked = []
    for index, (fragment, text, values) in enumerate(passages):
        if not fragment or len(fragment) > MAX_FRAGMENT_CHARS:
            raise InvalidRequest(
                f"passages[{index}].fragment must be 1 to {MAX_FRAGMENT_CHARS} characters (e.g. '#p3.1')",
                field=f"passages[{index}].fragment",
            )
        if fragment in seen:
            raise InvalidRequest(
                f"passages[{index}].fragment {fragment!r} is given twice; fragments are unique within a call",
                field=f"passages[{index}].fragment",
                fragment=fragment,
            )
        seen.add(fragment)
        size = len(text.encode("utf-8"))
        if size > MAX_PASSAGE_BYTES:
            raise PassageTooLarge(index, fragment, size)
        if not text.strip():
            raise InvalidRequest(f"passages[{index}].text must not be empty", field=f"passages[{index}].text")
        checked.append(Passage(fragment, text, check_metadata(values, f"passages[{index}].metadata")))
    version = PassageSet(title.strip(), check_metadata(metadata), tuple(checked))
    return IndexRequest(check_reference(document_ref), check_sha256(content_sha256), version)


def encode(version: PassageSet) -> bytes:
    """The job's blob: the version as JSON (read back by ``decode``)."""
    payload = {
        "format": PASSAGES_FORMAT,
        "title": version.title,
        "metadata": version.metadata,
        "passages": [{"fragment": p.fragment, "text": p.text, "metadata": p.metadata} for p in version.passages],
    }
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def decode(data: bytes) -> PassageSet:
    """A passages blob back as its version; ValueError when it is not one."""
    payload: dict[str, Any] = json.loads(data.decode("utf-8"))
    if not isinstance(payload, dict) or payload.get("format") != PASSAGES_FORMAT:
        raise ValueError("not a passages blob")
    passages = tuple(
        Passage(str(item["fragment"]), str(item["text"]), dict(item.get("metadata") or {}))
        for item in payload["passages"]
    )
    return PassageSet(str(payload.get("title", "")), dict(payload.get("metadata") or {}), passages)


# ---- versions -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VersionJob:
    """An unended job of a referenced document, as admission sees it."""

    job_id: uuid.UUID
    content_sha256: str | None
    cancel_requested: bool


@dataclass(frozen=True, slots=True)
class ReferencedDocument:
    """The live document of a (corpus, reference), as admission and removal see it."""

    document_id: int
    state: State
    chunk_count: int
    source_sha256: str | None  # the hash of the version searchable now; None before one stored
    unended: tuple[VersionJob, ...] = ()
    principals: tuple[str, ...] = ()  # its access list (runtime.reach.may_read_document)

    @property
    def searchable_version(self) -> bool:
        return self.source_sha256 is not None and self.state is State.SEARCHABLE


class Outcome(enum.StrEnum):
    NEW_DOCUMENT = "new-document"  # the reference is new: a document and its first job
    NEW_VERSION = "new-version"  # a new hash for a known reference: a new job on the same document
    UNCHANGED = "unchanged"  # the hash of the version searchable now: nothing to index
    IN_PROGRESS = "in-progress"  # the hash a job of it is indexing now: that job answers


@dataclass(frozen=True, slots=True)
class VersionAdmission:
    outcome: Outcome
    cancel: tuple[uuid.UUID, ...] = ()  # earlier unfinished jobs the later request supersedes
    job_id: uuid.UUID | None = None  # IN_PROGRESS: the job indexing this hash
    requeues_document: bool = False  # the document has no searchable version: it follows the new job

    @property
    def creates_job(self) -> bool:
        return self.outcome in (Outcome.NEW_DOCUMENT, Outcome.NEW_VERSION)


def admit_version(existing: ReferencedDocument | None, content_sha256: str) -> VersionAdmission:
    """What a version's request does. The later request wins: any unfinished job of another hash
    is cancelled (its store is conditioned on not being cancelled, so it never lands), whether
    this request makes a job or finds its hash searchable already. A job still indexing this very
    hash is the answer (not a second one)."""
    if existing is None:
        return VersionAdmission(Outcome.NEW_DOCUMENT)
    same = [j for j in existing.unended if j.content_sha256 == content_sha256 and not j.cancel_requested]
    others = tuple(j.job_id for j in existing.unended if j not in same)
    if existing.searchable_version and existing.source_sha256 == content_sha256:
        return VersionAdmission(Outcome.UNCHANGED, cancel=others + tuple(j.job_id for j in same))
    if same:
        return VersionAdmission(Outcome.IN_PROGRESS, cancel=others, job_id=same[0].job_id)
    return VersionAdmission(
        Outcome.NEW_VERSION, cancel=others, requeues_document=not (existing.searchable_version and existing.chunk_count)
    )


@dataclass(frozen=True, slots=True)
class Admitted:
    """What a version's admission did: its outcome, its document, and its job (None: unchanged)."""

    outcome: Outcome
    document_id: int
    job: Job | None
