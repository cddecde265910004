import time

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from knowledge_runtime.auth import (
    ADMIN_CAPABILITIES,
    ALL_CAPABILITIES,
    INTERNAL_CAPABILITIES,
    PUBLIC_CAPABILITIES,
    Scope,
    bearer_token,
    scope_from_claims,
)
from knowledge_runtime.devkeys import KEY_ID_FILE, PRIVATE_KEY_FILE, ensure_dev_keys, mint_dev_token
from knowledge_runtime.errors import Unauthenticated
from knowledge_runtime.refusals import Refused


def test_a_dev_token_verifies_to_its_tenant_and_the_public_capabilities(verifier, make_token):
    scope = verifier.verify(make_token("acme"))
    assert scope.tenant == "acme"
    assert scope.capabilities == frozenset(PUBLIC_CAPABILITIES)


def test_only_a_service_token_carries_internal_capabilities(verifier, make_service_token, keys_dir):
    assert verifier.verify(make_service_token("acme")).capabilities == frozenset(ALL_CAPABILITIES)
    with pytest.raises(ValueError, match="only for service tokens"):
        mint_dev_token(keys_dir, tenant="acme", capabilities=["search", "blob.read"])
    # A user's token whose issuer put internal capabilities in it anyway: they are not granted.
    claims = {
        "iss": "knowledge-dev",
        "aud": "knowledge",
        "exp": int(time.time()) + 60,
        "tenant": "acme",
        "sub": "alice",
        "capabilities": list(ALL_CAPABILITIES),
    }
    forged = _signed(keys_dir, claims)
    assert verifier.verify(forged).capabilities == frozenset(PUBLIC_CAPABILITIES + ADMIN_CAPABILITIES)
    for subject in ("service:", "services:ingest", "Service:ingest"):
        assert not verifier.verify(_signed(keys_dir, {**claims, "sub": subject})).capabilities & set(
            INTERNAL_CAPABILITIES
        )


def _signed(keys_dir, claims: dict, headers: dict | None = None) -> str:
    kid = (keys_dir / KEY_ID_FILE).read_text().strip()
    return jwt.encode(
        claims, (keys_dir / PRIVATE_KEY_FILE).read_bytes(), algorithm="RS256", headers={"kid": kid, **(headers or {})}
    )


@pytest.mark.parametrize(
    "capabilities",
    [
        {"search": False},
        {"search": True},
        1,
        True,
        None,
        ["search", 1],
        ["search", ["corpus.read"]],
        [{"search": 1}],
    ],
)
def test_capabilities_of_any_other_shape_are_unauthenticated(capabilities):
    with pytest.raises(Unauthenticated) as caught:
        scope_from_claims({"tenant": "t", "capabilities": capabilities})
    assert caught.value.code == "UNAUTHENTICATED"


def test_an_es256_token_with_the_real_key_id_is_unauthenticated(verifier, keys_dir):
    kid = (keys_dir / KEY_ID_FILE).read_text().strip()
    claims = {"iss": "knowledge-dev", "aud": "knowledge", "exp": int(time.time()) + 60, "tenant": "acme"}
    for algorithm, key in (("ES256", ec.generate_private_key(ec.SECP256R1())), ("HS256", "secret" * 6)):
        token = jwt.encode(claims, key, algorithm=algorithm, headers={"kid": kid})
        with pytest.raises(Unauthenticated) as caught:
            verifier.verify(token)
        assert caught.value.reason == "TOKEN_INVALID"


@pytest.mark.parametrize(
    ("claim", "value"),
    [
        ("tenant", "acme\x00"),
        ("tenant", "acme\r\nx-tenant: other"),
        ("tenant", "a\nb"),
        ("sub", "alice\r\n"),
        ("capabilities", ["search\x00"]),
        ("sub", 5),
    ],
)
def test_control_characters_in_a_signed_claim_are_unauthenticated(verifier, keys_dir, claim, value):
    claims = {"iss": "knowledge-dev", "aud": "knowledge", "exp": int(time.time()) + 60, "tenant": "acme", claim: value}
    with pytest.raises(Unauthenticated) as caught:
        verifier.verify(_signed(keys_dir, claims))
    assert caught.value.reason == "TOKEN_INVALID"


def test_named_capabilities_only(verifier, make_token):
    scope = verifier.verify(make_token("acme", ["search"]))
    assert scope.capabilities == {"search"}
    with pytest.raises(Refused) as caught:
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
    token = jwt.encode(
        {"iss": "knowledge-dev", "aud": "knowledge", "exp": int(time.time()) + 60, "tenant": "acme"},
        None,
        algorithm="none",
    )
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


def test_the_cli_dev_token_is_a_users_unless_internal_is_asked_for(tmp_path, monkeypatch, capsys):
    from knowledge_cli.main import main
    from knowledge_runtime.auth import TokenVerifier

    verifier = TokenVerifier.from_file(ensure_dev_keys(tmp_path / "keys"), issuer="knowledge-dev", audience="knowledge")
    monkeypatch.setenv("KNOWLEDGE_DATA_DIR", str(tmp_path))

    def run(*args: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as ended:
            main(["dev-token", "--tenant", "acme", *args])
        out, err = capsys.readouterr()
        return ended.value.code, out.strip(), err

    code, token, _ = run()
    assert code == 0 and verifier.verify(token).capabilities == frozenset(PUBLIC_CAPABILITIES)
    code, _, err = run("--capabilities", "search,blob.read")
    assert code == 2 and "--internal" in err
    code, token, _ = run("--internal")
    assert code == 0 and verifier.verify(token).capabilities == frozenset(ALL_CAPABILITIES)
    code, token, _ = run("--internal", "--capabilities", "blob.read")
    assert code == 0 and verifier.verify(token).capabilities == {"blob.read"}


def test_the_cli_dev_token_carries_a_platform_capability_and_a_subject_only_when_named(tmp_path, monkeypatch, capsys):
    from knowledge_cli.main import main
    from knowledge_runtime.auth import TokenVerifier

    verifier = TokenVerifier.from_file(ensure_dev_keys(tmp_path / "keys"), issuer="knowledge-dev", audience="knowledge")
    monkeypatch.setenv("KNOWLEDGE_DATA_DIR", str(tmp_path))
    with pytest.raises(SystemExit) as ended:
        main(["dev-token", "--tenant", "acme", "--capabilities", "document.upload,system.write", "--subject", "alice"])
    token = capsys.readouterr().out.strip()
    scope = verifier.verify(token)
    assert ended.value.code == 0 and scope.capabilities == {"document.upload", "system.write"}
    assert scope.subject == "alice"
    with pytest.raises(SystemExit):
        main(["dev-token", "--tenant", "acme"])
    default = verifier.verify(capsys.readouterr().out.strip())
    assert "system.write" not in default.capabilities and default.subject == "dev"


def test_the_cli_dev_token_names_a_scope_and_a_clearance(tmp_path, monkeypatch, capsys):
    from knowledge_cli.main import main
    from knowledge_runtime.auth import TokenVerifier
    from knowledge_runtime.reach import Band

    verifier = TokenVerifier.from_file(ensure_dev_keys(tmp_path / "keys"), issuer="knowledge-dev", audience="knowledge")
    monkeypatch.setenv("KNOWLEDGE_DATA_DIR", str(tmp_path))

    def run(*args: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as ended:
            main(["dev-token", "--tenant", "acme", *args])
        out, err = capsys.readouterr()
        return ended.value.code, out.strip(), err

    code, token, _ = run()
    scope = verifier.verify(token)
    assert code == 0 and scope.scope_claim == "/" and scope.clearance is Band.TENANT  # the root by default
    code, token, _ = run("--scope", "workspace:eng/project:billing", "--clearance", "confidential")
    scope = verifier.verify(token)
    assert scope.scope_claim == "workspace:eng/project:billing" and scope.clearance is Band.CONFIDENTIAL
    for bad in (("--scope", "project:billing"), ("--clearance", "TOP_SECRET")):
        code, _, err = run(*bad)
        assert code == 2 and "knowledge:" in err


def test_the_cli_dev_token_carries_the_groups_named(tmp_path, monkeypatch, capsys):
    from knowledge_cli.main import main
    from knowledge_runtime.auth import TokenVerifier

    verifier = TokenVerifier.from_file(ensure_dev_keys(tmp_path / "keys"), issuer="knowledge-dev", audience="knowledge")
    monkeypatch.setenv("KNOWLEDGE_DATA_DIR", str(tmp_path))

    def run(*args: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as ended:
            main(["dev-token", "--tenant", "acme", "--subject", "ana", *args])
        out, err = capsys.readouterr()
        return ended.value.code, out.strip(), err

    code, token, _ = run("--groups", "hr, finance,")
    scope = verifier.verify(token)
    assert code == 0 and scope.groups == {"hr", "finance"}
    assert scope.principals == {"user:ana", "group:hr", "group:finance"}
    code, token, _ = run()
    assert code == 0 and verifier.verify(token).groups == frozenset()  # none unless named
    code, _, err = run("--groups", "hr,fin\tance")
    assert code == 2 and "knowledge:" in err and "principal" in err


@pytest.mark.parametrize(
    "groups",
    ["hr", {"hr": True}, ["hr", 3], ["hr\n"], [f"g{i}" for i in range(1001)]],
    ids=["a string", "an object", "a number in the list", "a control character", "too many"],
)
def test_a_groups_claim_of_any_other_shape_is_unauthenticated(groups):
    with pytest.raises(Unauthenticated) as refused:
        scope_from_claims({"tenant": "acme", "sub": "ana", "groups": groups})
    assert refused.value.reason == "TOKEN_INVALID"


def test_the_principals_of_a_token_are_its_subject_and_its_groups():
    scope = scope_from_claims({"tenant": "acme", "sub": "ana", "groups": ["hr", "", "cfo-office"], "scope": "/"})
    assert scope.principals == {"user:ana", "group:hr", "group:cfo-office"}
    assert scope.reader([]).principals == scope.principals  # what every read is judged by
    assert scope_from_claims({"tenant": "acme"}).principals == frozenset()  # no subject, no groups
