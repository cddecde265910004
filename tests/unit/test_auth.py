import time

import jwt
import pytest
from knowledge_runtime.auth import ALL_CAPABILITIES, Scope, bearer_token, scope_from_claims
from knowledge_runtime.devkeys import PRIVATE_KEY_FILE, ensure_dev_keys
from knowledge_runtime.errors import PermissionDenied, Unauthenticated


def test_a_dev_token_verifies_to_its_tenant_and_all_capabilities(verifier, make_token):
    scope = verifier.verify(make_token("acme"))
    assert scope.tenant == "acme"
    assert scope.capabilities == frozenset(ALL_CAPABILITIES)


def test_named_capabilities_only(verifier, make_token):
    scope = verifier.verify(make_token("acme", ["search"]))
    assert scope.capabilities == {"search"}
    with pytest.raises(PermissionDenied) as caught:
        scope.require("corpus.read")
    assert caught.value.reason == "CAPABILITY_MISSING"
    assert caught.value.metadata == {"capability": "corpus.read"}


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"ttl_s": -120}, "TOKEN_EXPIRED"),
        ({"issuer": "someone-else"}, "TOKEN_INVALID"),
        ({"audience": "another-api"}, "TOKEN_INVALID"),
    ],
)
def test_expired_or_foreign_tokens_are_unauthenticated(verifier, make_token, kwargs, reason):
    with pytest.raises(Unauthenticated) as caught:
        verifier.verify(make_token("acme", **kwargs))
    assert caught.value.reason == reason


def test_a_token_signed_by_another_key_is_refused(verifier, tmp_path):
    ensure_dev_keys(tmp_path)
    now = int(time.time())
    forged = jwt.encode(
        {"iss": "knowledge-dev", "aud": "knowledge", "exp": now + 60, "tenant": "acme"},
        (tmp_path / PRIVATE_KEY_FILE).read_bytes(),
        algorithm="RS256",
    )
    with pytest.raises(Unauthenticated):
        verifier.verify(forged)


def test_alg_none_is_refused(verifier):
    token = jwt.encode({"iss": "knowledge-dev", "aud": "knowledge", "exp": int(time.time()) + 60,
                        "tenant": "acme"}, None, algorithm="none")
    with pytest.raises(Unauthenticated):
        verifier.verify(token)


def test_claims_without_tenant_resolve_nothing():
    with pytest.raises(Unauthenticated) as caught:
        scope_from_claims({"capabilities": ["search"]})
    assert caught.value.reason == "TENANT_UNRESOLVED"
    with pytest.raises(Unauthenticated):
        scope_from_claims({"tenant": "   "})


def test_capabilities_may_be_a_space_separated_string():
    assert scope_from_claims({"tenant": "t", "capabilities": "search corpus.read"}) == Scope(
        tenant="t", capabilities=frozenset({"search", "corpus.read"})
    )


def test_bearer_token_parsing():
    assert bearer_token([("authorization", "Bearer abc")]) == "abc"
    assert bearer_token([("authorization", "Basic abc")]) is None
    assert bearer_token([]) is None
