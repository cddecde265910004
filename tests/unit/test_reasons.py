"""The reason catalogue: the proto enum and the runtime's table name the same reasons, every reason
the code or the gateway can send is in it, every metadata key it uses has one meaning, and
docs/api.md's table is the generated one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from knowledge.v1 import common_pb2
from knowledge_gateway.config import GatewayConfig
from knowledge_gateway.envoy import render
from knowledge_runtime.reasons import HTTP_OF_CODE, METADATA_KEYS, REASONS, reasons_markdown
from knowledge_runtime.refusals import REFUSALS

from tests.support import reasons as collect

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "ERROR_REASON_"
# Where the gateway answers a REST caller with another status than its code's (the gRPC caller
# gets the code): a body over the cap, no such path, a method the path lacks, the request's time,
# its headers.
HTTP_OVERRIDES = {
    "UPLOAD_TOO_LARGE": 413,
    "METHOD_NOT_FOUND": 404,
    "METHOD_NOT_ALLOWED": 405,
    "REQUEST_TIMEOUT": 408,
    "HEADERS_TOO_LARGE": 431,
}
SOURCES = (
    ROOT / "runtime/src/knowledge_runtime",
    ROOT / "services",
    ROOT / "gateway/src",
    ROOT / "cli/src",
)


def rendered_gateway() -> dict:
    return render(
        GatewayConfig(
            listen_host="127.0.0.1",
            listen_port=8080,
            admin_port=0,
            upstreams={"ingest": "127.0.0.1:1", "search": "127.0.0.1:2", "documents-ai": "127.0.0.1:3"},
            jwks_path=Path("/keys/jwks.json"),
            issuer="iss",
            audience="aud",
            descriptor_path=Path("/d.pb"),
        )
    )


def raised_in_code() -> collect.Found:
    return collect.from_python(collect.python_files(*SOURCES), ROOT)


def test_the_proto_enum_and_the_table_name_the_same_reasons():
    names = [v.name.removeprefix(PREFIX) for v in common_pb2.ErrorReason.DESCRIPTOR.values if v.number != 0]
    assert len(names) == len(set(names))
    assert set(names) == set(REASONS)


def test_every_refusal_is_in_the_catalogue_as_a_refusal():
    refusal_names = {v.name.removeprefix("REFUSAL_REASON_") for v in common_pb2.RefusalReason.DESCRIPTOR.values}
    assert {r.value for r in REFUSALS} == refusal_names - {"UNSPECIFIED"}
    assert {name for name, spec in REASONS.items() if spec.refusal} == {r.value for r in REFUSALS}


@pytest.mark.parametrize("reason", sorted(REASONS))
def test_each_reason_has_a_code_its_http_status_known_keys_and_a_meaning(reason):
    spec = REASONS[reason]
    assert reason.isupper() and reason.replace("_", "").isalnum()
    assert spec.code in grpc.StatusCode.__members__ and spec.code != "OK"
    assert spec.http_status == HTTP_OVERRIDES.get(reason, HTTP_OF_CODE[spec.code])
    assert set(spec.metadata) <= set(METADATA_KEYS), spec.metadata
    assert spec.meaning and not spec.meaning.endswith(".")


def test_every_reason_raised_in_the_code_is_in_the_catalogue():
    found = raised_in_code()
    assert len(found.reasons) > 60  # the walk reads the services, not nothing
    unknown = {reason: where for reason, where in found.reasons.items() if reason not in REASONS}
    assert unknown == {}


def test_every_reason_the_gateway_answers_itself_is_in_the_catalogue():
    found = collect.from_gateway(rendered_gateway())
    # Its own answers: the tokens, the cap, the rate, a path or method the API lacks, its headers, the
    # upstream's absence or time, and the unknown field it refuses before the transcoder drops it.
    assert {"TOKEN_MISSING", "TOKEN_EXPIRED", "TOKEN_INVALID", "UPLOAD_TOO_LARGE", "RATE_LIMITED"} <= set(found.reasons)
    assert {"METHOD_NOT_FOUND", "METHOD_NOT_ALLOWED", "UNKNOWN_FIELD", "UPSTREAM_UNAVAILABLE"} <= set(found.reasons)
    assert {"max_bytes", "field"} <= set(found.metadata_keys)
    assert {reason: where for reason, where in found.reasons.items() if reason not in REASONS} == {}
    assert set(found.metadata_keys) <= set(METADATA_KEYS)


def test_every_metadata_key_the_code_sends_has_one_meaning_in_the_catalogue():
    found = raised_in_code()
    assert {"field", "capability", "max_bytes", "document_id", "corpus_id"} <= set(found.metadata_keys)
    unknown = {key: where for key, where in found.metadata_keys.items() if key not in METADATA_KEYS}
    assert unknown == {}


def test_the_walk_finds_each_way_a_reason_is_raised(tmp_path):
    """The collector itself: a reason it could not see would pass the test above unseen."""
    source = tmp_path / "errors.py"
    source.write_text(
        "class Odd(InvalidField):\n"
        '    reason = "ODD_CLASS_REASON"\n'
        "    def __init__(self):\n"
        '        super().__init__("f", "m", odd_key="1")\n'
        'raise DomainError("m", reason="ODD_KEYWORD_REASON", metadata={"odd_meta": "1"})\n'
        'raise Failed("m", reason=Failed.ODD_CONSTANT)\n'
        'raise Refused(Refusal.ODD_REFUSAL, "m")\n'
        'raise DependencyUnavailable("odd service")\n'
        'raise Odd("m", field="x", other_key="2")\n'
    )
    found = collect.from_python([source], tmp_path)
    assert set(found.reasons) == {
        "ODD_CLASS_REASON",
        "ODD_KEYWORD_REASON",
        "ODD_CONSTANT",
        "ODD_REFUSAL",
        "ODD_SERVICE_UNAVAILABLE",
        "ODD_SERVICE_OVERLOADED",
    }
    assert set(found.metadata_keys) == {"odd_key", "odd_meta", "other_key"}


def test_the_api_reference_lists_the_catalogue_as_the_table_says():
    """docs/api.md's reasons and metadata keys are generated (scripts/gen_refusals.py, make protos)."""
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    assert reasons_markdown() in text
    check = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_refusals.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stderr
    for reason, spec in REASONS.items():
        assert f"| `{reason}` | {spec.code} | {spec.http_status} |" in text


def test_an_unknown_id_in_a_search_filter_names_it_as_get_document_does():
    """One key per identifier, in every service: search's DocumentNotFound carries document_id."""
    from knowledge_runtime.errors import DocumentNotFound as RuntimeDocumentNotFound
    from knowledge_search.domain.errors import CorpusNotFound, DocumentNotFound
    from knowledge_search.domain.model import SearchRequest

    assert DocumentNotFound is RuntimeDocumentNotFound
    with pytest.raises(DocumentNotFound) as caught:
        SearchRequest.parse("vacation", document_id="x7")
    assert (caught.value.reason, caught.value.metadata) == ("DOCUMENT_NOT_FOUND", {"document_id": "x7"})
    with pytest.raises(CorpusNotFound) as caught_corpus:
        SearchRequest.parse("vacation", corpus_id="01")
    assert caught_corpus.value.metadata == {"corpus_id": "01"}


def test_an_invalid_field_is_invalid_request_in_every_service():
    from knowledge_content_index.domain.errors import InvalidBlobRequest
    from knowledge_documents_ai.domain.errors import InvalidRequest, TaxonomyInvalid
    from knowledge_embedder.domain.errors import InvalidInput
    from knowledge_ingest.domain.errors import InvalidCorpus
    from knowledge_runtime.pagination import InvalidPageSize
    from knowledge_search.domain.errors import InvalidSearch

    errors = [
        InvalidBlobRequest("m", field="f"),
        InvalidRequest("f", "m"),
        TaxonomyInvalid("f", "m"),
        InvalidInput("m", field="f"),
        InvalidCorpus("m", field="f"),
        InvalidSearch("m", field="f"),
    ]
    assert {(e.code, e.reason, e.metadata["field"]) for e in errors} == {("INVALID_ARGUMENT", "INVALID_REQUEST", "f")}
    assert (InvalidPageSize().reason, InvalidPageSize().metadata) == ("INVALID_REQUEST", {"field": "page_size"})
