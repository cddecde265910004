"""``knowledge mcp``: the token comes from KNOWLEDGE_TOKEN or is minted for --tenant with the local
stack's key (minted again before it expires); without one, or with both, it refuses to start."""

from __future__ import annotations

import pytest
from knowledge_cli import devtoken, mcp
from knowledge_cli.main import main
from knowledge_runtime.auth import TokenVerifier
from knowledge_runtime.devkeys import ensure_dev_keys
from knowledge_runtime.settings import DEFAULT_JWT_AUDIENCE, DEFAULT_JWT_ISSUER


def run(argv: list[str], capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    return exited.value.code, capsys.readouterr().err


def test_without_a_token_or_with_two_it_does_not_start(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("KNOWLEDGE_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("KNOWLEDGE_TOKEN", raising=False)
    code, err = run(["mcp"], capsys)
    assert code == 2 and "KNOWLEDGE_TOKEN" in err and "--tenant" in err
    monkeypatch.setenv("KNOWLEDGE_TOKEN", "a-token")
    code, err = run(["mcp", "--tenant", "acme"], capsys)
    assert code == 2 and "not both" in err


def test_a_tenant_needs_the_local_stacks_key_and_a_valid_scope(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("KNOWLEDGE_DATA_DIR", str(tmp_path))  # no keys there: no stack has run
    monkeypatch.delenv("KNOWLEDGE_TOKEN", raising=False)
    code, err = run(["mcp", "--tenant", "acme"], capsys)
    assert code == 1 and "knowledge:" in err
    code, err = run(["mcp", "--tenant", "acme", "--scope", "nowhere:x"], capsys)
    assert code == 2


def test_the_minted_token_carries_the_reach_and_is_minted_again_before_it_expires(monkeypatch, tmp_path):
    ensure_dev_keys(tmp_path / "keys")  # as `knowledge up` leaves them
    verifier = TokenVerifier.from_file(
        tmp_path / "keys" / "jwks.json", issuer=DEFAULT_JWT_ISSUER, audience=DEFAULT_JWT_AUDIENCE
    )
    monkeypatch.setenv("KNOWLEDGE_DATA_DIR", str(tmp_path))
    clock, minted = [1000.0], []
    monkeypatch.setattr(mcp.time, "monotonic", lambda: clock[0])
    real = devtoken.mint_local_token
    monkeypatch.setattr(devtoken, "mint_local_token", lambda *a, **k: minted.append(k) or real(*a, **k))
    token = mcp.minting("acme", "workspace:eng", "CONFIDENTIAL")
    first = token()
    scope = verifier.verify(first)
    assert (scope.tenant, scope.scope_claim, scope.clearance.value) == ("acme", "workspace:eng", "CONFIDENTIAL")
    clock[0] += mcp.REMINT_AFTER_S - 1
    assert token() == first and len(minted) == 1  # the same token while it has long to live
    clock[0] += 2
    assert verifier.verify(token()).tenant == "acme" and len(minted) == 2
