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


def test_the_readme_and_the_openapi_description_list_the_set_as_the_table_says():
    """Both are generated from REFUSALS (scripts/gen_refusals.py, make protos): they cannot drift."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from knowledge_gateway.openapi import generate, openapi_text
    from knowledge_runtime.refusals import refusals_markdown

    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text(encoding="utf-8")
    assert refusals_markdown() in readme
    check = subprocess.run(
        [sys.executable, str(root / "scripts" / "gen_refusals.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stderr
    served = json.loads(openapi_text())
    assert refusals_markdown() in served["info"]["description"] and openapi_text() == generate()
    for refusal, spec in REFUSALS.items():
        row = f"| `{refusal.value}` | {spec.code} | {spec.http_status} | {spec.meaning} | "
        assert row + ("yes" if spec.waiting_helps else "no") + " |" in readme


def test_a_callee_s_refusal_stays_that_refusal_whatever_its_code():
    """A used-up quota is RESOURCE_EXHAUSTED but no passing overload: the caller must not retry it."""
    from google.protobuf import any_pb2
    from google.rpc import error_details_pb2, status_pb2
    from knowledge_runtime.errors import DependencyUnavailable
    from knowledge_runtime.rpc_errors import domain_error_from

    def rpc_error(code: grpc.StatusCode, reason: str) -> grpc.aio.AioRpcError:
        detail = any_pb2.Any()
        detail.Pack(error_details_pb2.ErrorInfo(reason=reason, domain="knowledge.v1"))
        status = status_pb2.Status(code=code.value[0], message="m", details=[detail])
        trailers = grpc.aio.Metadata(("grpc-status-details-bin", status.SerializeToString()))
        return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), trailers, details="refused by the callee")

    quota = domain_error_from(rpc_error(grpc.StatusCode.RESOURCE_EXHAUSTED, "QUOTA_EXHAUSTED"), "embedder")
    assert isinstance(quota, Refused) and quota.refusal is Refusal.QUOTA_EXHAUSTED and not quota.waiting_helps
    down = domain_error_from(rpc_error(grpc.StatusCode.UNAVAILABLE, "RUNTIME_UNAVAILABLE"), "embedder")
    assert isinstance(down, Refused) and down.code == "UNAVAILABLE" and down.waiting_helps
    overloaded = domain_error_from(rpc_error(grpc.StatusCode.RESOURCE_EXHAUSTED, "EMBEDDER_OVERLOADED"), "embedder")
    assert isinstance(overloaded, DependencyUnavailable) and overloaded.code == "RESOURCE_EXHAUSTED"
    wrong_code = domain_error_from(rpc_error(grpc.StatusCode.INTERNAL, "QUOTA_EXHAUSTED"), "embedder")
    assert not isinstance(wrong_code, Refused)


def test_a_status_the_channel_made_is_told_apart_from_one_the_callee_answered():
    """search's and documents-ai's embedder clients and ingest's restart check share this one predicate."""
    from google.protobuf import any_pb2
    from google.rpc import error_details_pb2, status_pb2
    from knowledge_runtime.rpc_errors import made_by_channel

    def rpc_error(code: grpc.StatusCode, reason: str | None = None) -> grpc.aio.AioRpcError:
        trailers = grpc.aio.Metadata()
        if reason is not None:
            detail = any_pb2.Any()
            detail.Pack(error_details_pb2.ErrorInfo(reason=reason, domain="knowledge.v1"))
            status = status_pb2.Status(code=code.value[0], message="m", details=[detail])
            trailers = grpc.aio.Metadata(("grpc-status-details-bin", status.SerializeToString()))
        return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), trailers, details="failed to connect")

    for code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.RESOURCE_EXHAUSTED):
        assert made_by_channel(rpc_error(code))
    assert not made_by_channel(rpc_error(grpc.StatusCode.UNAVAILABLE, "EMBEDDER_STOPPING"))  # the callee answered
    assert not made_by_channel(rpc_error(grpc.StatusCode.INTERNAL))  # not a passing failure
    assert not made_by_channel(rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED), (grpc.StatusCode.UNAVAILABLE,))
