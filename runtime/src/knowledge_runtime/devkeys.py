"""The local development signing key of the embedded stack.

Generated on first use under ``<data dir>/keys`` (mode 0600), never committed and never
logged. Production uses its own JWKS (RS256/ES256) through ``KNOWLEDGE_JWKS_PATH``.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from knowledge_runtime.auth import (
    ALL_CAPABILITIES,
    CAPABILITIES_CLAIM,
    CLEARANCE_CLAIM,
    GROUPS_CLAIM,
    INTERNAL_CAPABILITIES,
    PUBLIC_CAPABILITIES,
    SCOPE_CLAIM,
    SERVICE_SUBJECT_PREFIX,
    TENANT_CLAIM,
)
from knowledge_runtime.settings import DEFAULT_JWT_AUDIENCE, DEFAULT_JWT_ISSUER

PRIVATE_KEY_FILE = "dev-signing-key.pem"
KEY_ID_FILE = "dev-signing-key.kid"
JWKS_FILE = "jwks.json"


def ensure_dev_keys(keys_dir: Path) -> Path:
    """Create the development key pair once; returns the JWKS path."""
    keys_dir.mkdir(parents=True, exist_ok=True)
    private_path = keys_dir / PRIVATE_KEY_FILE
    jwks_path = keys_dir / JWKS_FILE
    if private_path.exists() and jwks_path.exists():
        return jwks_path
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    kid = uuid.uuid4().hex[:16]
    public_jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    public_jwk.update({"kid": kid, "alg": "RS256", "use": "sig"})
    _write_private(private_path, pem)
    (keys_dir / KEY_ID_FILE).write_text(kid)
    tmp = jwks_path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"keys": [public_jwk]}, indent=2))
    os.replace(tmp, jwks_path)
    return jwks_path


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path.with_suffix(".tmp"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(path.with_suffix(".tmp"), path)


def mint_dev_token(
    keys_dir: Path,
    *,
    tenant: str,
    capabilities: Iterable[str] | None = None,
    issuer: str = DEFAULT_JWT_ISSUER,
    audience: str = DEFAULT_JWT_AUDIENCE,
    ttl_s: int = 3600,
    subject: str = "dev",
    service: str | None = None,
    scope: str | None = "/",
    clearance: str | None = None,
    groups: Iterable[str] | None = None,
) -> str:
    """A JWT signed with the development key.

    A user's token by default: the public capabilities when none are named, and never an
    internal one. ``service="name"`` mints a service token instead (subject ``service:name``),
    all capabilities when none are named: what a backend service signs for its own calls.
    ``scope`` is the ``scope`` claim (the tenant root by default; None leaves it out, and such a
    token reads nothing); ``clearance`` the ``clearance`` claim (absent by default: TENANT);
    ``groups`` the ``groups`` claim (absent by default: the token is in no group).
    """
    if service is not None:
        subject = SERVICE_SUBJECT_PREFIX + service
        granted = list(capabilities) if capabilities is not None else list(ALL_CAPABILITIES)
    else:
        granted = list(capabilities) if capabilities is not None else list(PUBLIC_CAPABILITIES)
        internal = sorted(set(granted) & set(INTERNAL_CAPABILITIES))
        if internal:
            raise ValueError(f"internal capabilities ({', '.join(internal)}) are only for service tokens")
    private_path = keys_dir / PRIVATE_KEY_FILE
    if not private_path.exists():
        raise FileNotFoundError(f"no development key under {keys_dir}; run `knowledge up` once first")
    kid = (keys_dir / KEY_ID_FILE).read_text().strip()
    now = int(time.time())
    claims = {
        "iss": issuer,
        "aud": audience,
        "sub": subject,
        "iat": now,
        "exp": now + ttl_s,
        TENANT_CLAIM: tenant,
        CAPABILITIES_CLAIM: granted,
    }
    if scope is not None:
        claims[SCOPE_CLAIM] = scope
    if clearance is not None:
        claims[CLEARANCE_CLAIM] = clearance
    if groups is not None:
        claims[GROUPS_CLAIM] = list(groups)
    return jwt.encode(claims, private_path.read_bytes(), algorithm="RS256", headers={"kid": kid})
