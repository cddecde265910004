"""Development tokens for the local stack (``knowledge up``): signed with its key, for its issuer
and audience, read from the same ``KNOWLEDGE_*`` variables the stack itself reads."""

from __future__ import annotations

from collections.abc import Iterable

from knowledge_runtime.devkeys import mint_dev_token
from knowledge_runtime.settings import Env, default_data_dir, jwt_audience, jwt_issuer


def mint_local_token(
    tenant: str,
    *,
    capabilities: Iterable[str] | None = None,
    ttl_s: int = 3600,
    service: str | None = None,
    subject: str = "dev",
    scope: str | None = "/",
    clearance: str | None = None,
    groups: Iterable[str] | None = None,
) -> str:
    """A token the local stack accepts: a user's, with the public capabilities when none are
    named; with ``service``, a service token that may carry the internal ones (all when none are named).
    ``scope`` is its scope node (the tenant root by default), ``clearance`` its highest band,
    ``groups`` its ``groups`` claim (the principals group:<name> of documents' access lists).

    Raises FileNotFoundError when the stack has not made its key yet.
    """
    env = Env()
    data_dir = env.path("DATA_DIR", default_data_dir())
    assert data_dir is not None
    return mint_dev_token(
        data_dir / "keys",
        tenant=tenant,
        capabilities=capabilities,
        issuer=jwt_issuer(env),
        audience=jwt_audience(env),
        ttl_s=ttl_s,
        service=service,
        subject=subject,
        scope=scope,
        clearance=clearance,
        groups=groups,
    )
