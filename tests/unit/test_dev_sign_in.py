"""The console's development sign-in (``knowledge up`` only): a real server on the loopback mints
a token the services accept, of the tenant, scope and clearance asked for; a wrong value is 400
INVALID_REQUEST naming the field, as the API answers it."""

from __future__ import annotations

import httpx
import pytest
from knowledge_cli.dev_sign_in import CAPABILITIES, DevSignIn, SignInError, token_request
from knowledge_runtime.reach import Band
from knowledge_runtime.settings import DEFAULT_JWT_AUDIENCE, DEFAULT_JWT_ISSUER


@pytest.fixture
def sign_in(keys_dir):
    server = DevSignIn(keys_dir, host="127.0.0.1", issuer=DEFAULT_JWT_ISSUER, audience=DEFAULT_JWT_AUDIENCE).start()
    yield f"http://{server.address}/console/dev-token"
    server.stop()


def test_a_token_of_the_tenant_scope_and_clearance_asked_for(sign_in, verifier):
    answer = httpx.post(sign_in, json={"tenant": "acme", "scope": "workspace:eng", "clearance": "CONFIDENTIAL"})
    assert answer.status_code == 200 and answer.headers["cache-control"] == "no-store"
    body = answer.json()
    scope = verifier.verify(body["token"])
    assert (scope.tenant, scope.scope_claim, scope.clearance) == ("acme", "workspace:eng", Band.CONFIDENTIAL)
    assert scope.capabilities == frozenset(CAPABILITIES) and "platform.admin" not in scope.capabilities
    assert body["expires_in"] == 3600
    plain = verifier.verify(httpx.post(sign_in, json={"tenant": "acme"}).json()["token"])
    assert (plain.scope_claim, plain.clearance) == ("/", Band.TENANT)  # the root, the default band


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "tenant"),
        ({"tenant": "  "}, "tenant"),
        ({"tenant": "a" * 65}, "tenant"),
        ({"tenant": "acme", "scope": "eng"}, "scope"),
        ({"tenant": "acme", "clearance": "SECRET"}, "clearance"),
        ({"tenant": "acme", "capabilities": ["platform.admin"]}, "capabilities"),
    ],
)
def test_a_wrong_value_is_invalid_request_naming_the_field(sign_in, body, field):
    answer = httpx.post(sign_in, json=body)
    assert answer.status_code == 400
    status = answer.json()
    assert status["code"] == 3 and status["message"]
    (info,) = status["details"]
    assert (info["reason"], info["metadata"]) == ("INVALID_REQUEST", {"field": field})


def test_a_body_that_is_not_a_json_object_is_refused(sign_in):
    assert httpx.post(sign_in, content=b"not json").json()["details"][0]["metadata"] == {"field": "body"}
    with pytest.raises(SignInError):
        token_request(b"[1]")
