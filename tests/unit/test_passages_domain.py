"""Passages by reference, the pure decisions: a request's shape, what a version's admission does
given what its document has, and the job's blob read back as given."""

import uuid

import pytest
from knowledge_ingest.domain.documents import State
from knowledge_ingest.domain.errors import InvalidRequest
from knowledge_ingest.domain.passages import (
    MAX_PASSAGE_BYTES,
    Outcome,
    Passage,
    PassageTooLarge,
    ReferencedDocument,
    VersionJob,
    admit_version,
    check_request,
    decode,
    encode,
)

A, B, C = "a" * 64, "b" * 64, "c" * 64
J1, J2 = uuid.UUID(int=1), uuid.UUID(int=2)


def document(state=State.SEARCHABLE, searchable: str | None = A, *jobs: VersionJob) -> ReferencedDocument:
    return ReferencedDocument(7, state, 3 if searchable else 0, searchable, tuple(jobs))


@pytest.mark.parametrize(
    ("existing", "sha", "outcome", "cancel", "job", "requeues"),
    [
        (None, A, Outcome.NEW_DOCUMENT, (), None, False),
        (document(), A, Outcome.UNCHANGED, (), None, False),
        (document(), B, Outcome.NEW_VERSION, (), None, False),  # the old version stays searchable
        (document(State.SEARCHABLE, A, VersionJob(J1, B, False)), B, Outcome.IN_PROGRESS, (), J1, False),
        (document(State.SEARCHABLE, A, VersionJob(J1, B, False)), C, Outcome.NEW_VERSION, (J1,), None, False),
        (document(State.SEARCHABLE, A, VersionJob(J1, B, False)), A, Outcome.UNCHANGED, (J1,), None, False),
        (document(State.SEARCHABLE, A, VersionJob(J1, B, True)), B, Outcome.NEW_VERSION, (J1,), None, False),
        (document(State.FAILED, None), A, Outcome.NEW_VERSION, (), None, True),  # no version yet: it follows
        (document(State.EMBEDDING, None, VersionJob(J2, A, False)), B, Outcome.NEW_VERSION, (J2,), None, True),
    ],
)
def test_a_versions_admission(existing, sha, outcome, cancel, job, requeues):
    decision = admit_version(existing, sha)
    assert (decision.outcome, decision.cancel, decision.job_id, decision.requeues_document) == (
        outcome,
        cancel,
        job,
        requeues,
    )
    assert decision.creates_job == (outcome in (Outcome.NEW_DOCUMENT, Outcome.NEW_VERSION))


def request(passages, **fields):
    values = {"document_ref": "p/42/a.pdf", "content_sha256": A.upper(), "title": "", "metadata": {}} | fields
    return check_request(passages=passages, **values)


def test_a_request_is_checked_and_keeps_its_passages_as_given():
    checked = request([("#p1.1", "  first  ", {"page": 1.0}), ("#p2.1", "second", {})])
    assert checked.content_sha256 == A and checked.filename == "a.pdf"  # lowercased; the reference's last segment
    assert checked.version.passages[0] == Passage("#p1.1", "  first  ", {"page": 1})
    assert [p.page for p in checked.version.passages] == [1, None]
    assert request([("#x", "t", {})], title="Title").filename == "Title"


def test_a_passage_over_64_kib_is_refused_naming_its_fragment():
    with pytest.raises(PassageTooLarge) as caught:
        request([("#ok", "x", {}), ("#big", "é" * (MAX_PASSAGE_BYTES // 2 + 1), {})])  # bytes, not characters
    error = caught.value
    assert (error.reason, error.metadata["fragment"], error.metadata["field"]) == (
        "PASSAGE_TOO_LARGE",
        "#big",
        "passages[1].text",
    )


@pytest.mark.parametrize(
    ("passages", "fields", "field"),
    [
        ([], {}, "passages"),
        ([("", "t", {})], {}, "passages[0].fragment"),
        ([("#a", "t", {}), ("#a", "u", {})], {}, "passages[1].fragment"),
        ([("#a", "   ", {})], {}, "passages[0].text"),
        ([("#a", "t", {})], {"content_sha256": "z" * 64}, "content_sha256"),
        ([("#a", "t", {})], {"document_ref": ""}, "document_ref"),
        ([("#a", "t", {})], {"document_ref": "a\nb"}, "document_ref"),
        ([("#a", "t", {})], {"title": "t" * 1001}, "title"),
    ],
)
def test_a_malformed_request_names_its_field(passages, fields, field):
    with pytest.raises(InvalidRequest) as caught:
        request(passages, **fields)
    assert caught.value.metadata["field"] == field


def test_the_blob_reads_back_as_given():
    version = request([("#p1", "Ünïcode text", {"tags": ["a"]})], title="T", metadata={"k": 1}).version
    assert decode(encode(version)) == version
    with pytest.raises(ValueError):
        decode(b'{"title": "not passages"}')
