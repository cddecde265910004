"""The one identifier parser every service uses."""

import pytest
from knowledge_content_index.api import convert as content_index
from knowledge_ingest.domain.documents import parse_id as ingest_id
from knowledge_ingest.domain.documents import parse_job_id
from knowledge_ingest.domain.errors import CorpusNotFound, DocumentNotFound, InvalidRequest, JobNotFound
from knowledge_runtime.errors import InvalidArgument, NotFound
from knowledge_runtime.ids import MAX_ID, parse_id
from knowledge_runtime.pagination import InvalidPageToken, decode_page_token, encode_page_token
from knowledge_search.domain.model import SearchRequest

HOSTILE = [
    "²",
    "¹",
    "١",
    "１",
    "߁",
    "𝟏",
    "01",
    "007",
    "+1",
    "-1",
    " 1",
    "1 ",
    "1\n",
    "\t1",
    "1_000",
    "1e3",
    "0x1",
    "1.0",
    "0",
    "00",
    "9223372036854775808",
    "99999999999999999999999",
    "1\x00",
    "",
    "one",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_every_other_spelling_is_no_id(text):
    assert parse_id(text) is None


@pytest.mark.parametrize(("text", "value"), [("1", 1), ("42", 42), ("9223372036854775807", MAX_ID)])
def test_one_spelling_per_id(text, value):
    assert parse_id(text) == value


@pytest.mark.parametrize("text", [t for t in HOSTILE if t])
def test_a_path_id_that_spells_none_is_not_found_in_every_service(text):
    with pytest.raises(DocumentNotFound):
        ingest_id(text, "document_id")
    with pytest.raises(CorpusNotFound):
        ingest_id(text, "corpus_id")
    with pytest.raises(NotFound):
        content_index.blob_id(text)
    with pytest.raises(NotFound):
        SearchRequest.parse("q", corpus_id=text)
    with pytest.raises(NotFound):
        SearchRequest.parse("q", document_id=text)


@pytest.mark.parametrize("text", [t for t in HOSTILE if t])
def test_a_page_token_id_that_spells_none_is_invalid_argument(text):
    # (the embedder's DocumentBinding, the other body id here, went with Index kind CHUNK)
    with pytest.raises(InvalidPageToken):
        decode_page_token(encode_page_token(text))  # type: ignore[arg-type]


def test_an_empty_id_is_missing_not_unknown():
    with pytest.raises(InvalidRequest):
        ingest_id("", "document_id")
    assert decode_page_token("") == 0


def test_a_job_id_has_one_spelling():
    canonical = "5b11e9e2-7c4f-4a47-9d3e-3c1f5e0c9a10"
    assert str(parse_job_id(canonical)) == canonical
    for other in (
        canonical.upper(),
        "{" + canonical + "}",
        "urn:uuid:" + canonical,
        canonical.replace("-", ""),
        " " + canonical,
    ):
        with pytest.raises(JobNotFound):
            parse_job_id(other)


def test_errors_are_domain_errors_with_their_codes():
    assert issubclass(InvalidPageToken, InvalidArgument)
