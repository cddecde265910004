"""The closed set of refusals: the proto enum and the runtime's table say the same, name for name."""

from __future__ import annotations

import grpc
import pytest
from knowledge.v1 import common_pb2
from knowledge_runtime.auth import Scope
from knowledge_runtime.refusals import REFUSALS, Refusal, Refused, refusal_of, waiting_helps

PREFIX = "REFUSAL_REASON_"

# What Envoy's gRPC-JSON transcoder answers for each code (google.rpc.Code's HTTP mapping).
HTTP_OF_CODE = {
    "PERMISSION_DENIED": 403,
    "RESOURCE_EXHAUSTED": 429,
    "FAILED_PRECONDITION": 400,
    "UNAVAILABLE": 503,
}


def test_the_proto_enum_and_the_table_name_the_same_reasons():
    names = {v.name.removeprefix(PREFIX) for v in common_pb2.RefusalReason.DESCRIPTOR.values if v.number != 0}
    assert names == {r.value for r in Refusal} == {r.value for r in REFUSALS}
    assert len(names) >= 8


@pytest.mark.parametrize("refusal", list(Refusal))
def test_each_reason_has_a_real_code_its_http_status_and_plain_words(refusal):
    spec = REFUSALS[refusal]
    assert spec.code in grpc.StatusCode.__members__
    assert spec.http_status == HTTP_OF_CODE[spec.code]
    assert spec.meaning and spec.plain and spec.plain != spec.meaning


def test_the_issue_s_statuses():
    assert REFUSALS[Refusal.SCOPE_UNRESOLVED].http_status == 403
    assert REFUSALS[Refusal.QUOTA_EXHAUSTED].http_status == 429
    assert REFUSALS[Refusal.RUNTIME_UNAVAILABLE].code == "UNAVAILABLE"
    assert REFUSALS[Refusal.INDEXING].waiting_helps and not REFUSALS[Refusal.QUOTA_EXHAUSTED].waiting_helps


def test_refused_takes_its_code_and_reason_from_the_table():
    error = Refused(Refusal.QUOTA_EXHAUSTED, "the tenant holds 5 documents of 5", metadata={"quota": "max_documents"})
    assert (error.code, error.reason, error.metadata) == (
        "RESOURCE_EXHAUSTED",
        "QUOTA_EXHAUSTED",
        {"quota": "max_documents"},
    )
    assert error.waiting_helps is False
    assert Refused(Refusal.RUNTIME_UNAVAILABLE, "embedder down").waiting_helps is True


def test_refusal_of_knows_only_the_closed_set():
    assert refusal_of("SCOPE_UNRESOLVED") is Refusal.SCOPE_UNRESOLVED
    assert refusal_of("UPLOAD_TOO_LARGE") is None and refusal_of("") is None
    assert waiting_helps("INDEXING") is True and waiting_helps("NOT_A_REFUSAL") is None


def test_a_missing_capability_is_the_closed_set_s_refusal():
    with pytest.raises(Refused) as caught:
        Scope(tenant="t1", capabilities=frozenset({"search"})).require("ingest")
    assert caught.value.refusal is Refusal.CAPABILITY_MISSING and caught.value.code == "PERMISSION_DENIED"
    assert caught.value.metadata == {"capability": "ingest"}
