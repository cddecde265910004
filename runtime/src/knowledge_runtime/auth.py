"""The caller's scope (tenant + capabilities) from a verified JWT.

The gateway verifies the bearer token and forwards it; the services verify it again
against the same key set, so a header that anything inside the network could set is
never trusted on its own. Internal callers send their own bearer token. A request field
never chooses the tenant.

The ``sub`` and ``groups`` claims name who the caller is inside its tenant: the principals
(``user:<sub>``, ``group:<name>``) that documents' access lists are matched against
(``reach.may_read_document``). They are the identity provider's, signed with the token; nothing in
a request body adds to them.

Capabilities come in two kinds. The public ones are what a user's token may carry. The
internal ones (``blob.*``, ``embed``) open the backend services' own RPCs; only a service token
carries them: one whose subject is ``service:<name>`` (``service_tokens.py`` signs those). An
internal capability in any other token is ignored, so a user's token never reaches content-index
or the embedder directly, whatever its issuer put in it.
"""

from __future__ import annotations

import contextvars
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import jwt

from knowledge_runtime.errors import Unauthenticated
from knowledge_runtime.reach import DEFAULT_CLEARANCE, Band, Reader, ScopePath, parse_band, principals_of, resolve
from knowledge_runtime.refusals import Refusal, Refused

# Public capabilities (docs/architecture.md) and the internal ones of the backend services.
# taxonomy.edit: change a tenant's document taxonomy and process documents against it.
# document.share: change who may read a document (SetDocumentAccess) or a corpus's default list.
DOCUMENT_SHARE = "document.share"
PUBLIC_CAPABILITIES = (
    "corpus.create",
    "corpus.read",
    "document.upload",
    "search",
    "corpus.bind",
    "taxonomy.edit",
    DOCUMENT_SHARE,
)
# Public too, but not in a token by default (`knowledge dev-token --capabilities` grants them):
# importing from the operator's import roots, and opting a corpus in to auto-indexing.
# An operator's: setting any tenant's enablement and quotas. Never in a default token.
PLATFORM_ADMIN = "platform.admin"
# An auditor's: listing the tenant's tombstones. Never in a default token.
AUDIT_READ = "audit.read"
# A tenant administrator's: the whole tenant's usage and spending (GetUsage); without it a caller
# is told the usage of its own node and below. Not platform.admin: that one sets every tenant's
# enablement and quotas, far more than reading one's own tenant's figures needs.
USAGE_ADMIN = "usage.admin"
# A tenant administrator's: registering webhooks, which push the events its token reads to a URL
# outside (and hold their signing secrets). Never in a default token.
WEBHOOKS_ADMIN = "webhooks.admin"
# An operator's: changing the deployment's embedding model (ModelChangeService). It acts on every
# tenant's vectors at once, so no tenant administrator's capability implies it.
MODELS_ADMIN = "models.admin"
ADMIN_CAPABILITIES = (
    "document.import",
    "imports.admin",
    PLATFORM_ADMIN,
    AUDIT_READ,
    USAGE_ADMIN,
    WEBHOOKS_ADMIN,
    MODELS_ADMIN,
)
INTERNAL_CAPABILITIES = ("embed", "blob.write", "blob.read", "blob.admin")
ALL_CAPABILITIES = PUBLIC_CAPABILITIES + ADMIN_CAPABILITIES + INTERNAL_CAPABILITIES

TENANT_CLAIM = "tenant"
CAPABILITIES_CLAIM = "capabilities"
# The caller's node in its tenant's scope hierarchy (reach.py), e.g. "workspace:eng/project:billing".
SCOPE_CLAIM = "scope"
# The highest confidentiality band the caller may read; TENANT when absent.
CLEARANCE_CLAIM = "clearance"
# The groups the caller belongs to, as the identity provider names them (a list of strings; absent:
# none). Each is the principal group:<name> in documents' access lists.
GROUPS_CLAIM = "groups"
MAX_GROUPS = 1000  # a token naming more is refused: the list rides in every read's query
ALGORITHMS = ("RS256", "ES256")
# The subject of a token a service signs for its own calls (the only holder of internal capabilities).
SERVICE_SUBJECT_PREFIX = "service:"
# No claim we read may hold a control character (NUL, CR, LF...): they would reach headers and logs.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def is_service_subject(subject: str) -> bool:
    return subject.startswith(SERVICE_SUBJECT_PREFIX) and len(subject) > len(SERVICE_SUBJECT_PREFIX)


@dataclass(frozen=True, slots=True)
class Scope:
    """Who is calling: a resolved tenant and what it may do, and where in the tenant it reads
    from (the ``scope`` claim, resolved against the tenant's nodes by :meth:`reader`; the
    hierarchy's node is ``reach.ScopePath``, not this class)."""

    tenant: str
    capabilities: frozenset[str]
    subject: str = ""
    scope_claim: str | None = None  # None: the token has none, and reads are refused
    clearance: Band = DEFAULT_CLEARANCE
    expires_at: float | None = None  # the token's ``exp`` (seconds since the epoch); a stream ends there
    groups: frozenset[str] = frozenset()  # the ``groups`` claim

    @property
    def principals(self) -> frozenset[str]:
        """Who the caller is to an access list: ``user:<sub>`` and ``group:<name>`` per group."""
        return principals_of(self.subject, self.groups)

    def reader(self, known: Iterable[ScopePath]) -> Reader:
        """The resolved reader (reach.Reader) or Refused(SCOPE_UNRESOLVED)."""
        return resolve(self.tenant, self.scope_claim, self.clearance, known, self.principals)

    @property
    def claimed_node(self) -> ScopePath | None:
        """The node the claim names when it parses (not yet resolved against the tenant)."""
        if self.scope_claim is None:
            return None
        try:
            return ScopePath.parse(self.scope_claim)
        except ValueError:
            return None

    def require(self, capability: str) -> None:
        if capability not in self.capabilities:
            raise Refused(
                Refusal.CAPABILITY_MISSING,
                f"missing capability {capability!r}",
                metadata={"capability": capability},
            )


_current_scope: contextvars.ContextVar[Scope | None] = contextvars.ContextVar("knowledge_scope", default=None)
_current_token: contextvars.ContextVar[str | None] = contextvars.ContextVar("knowledge_token", default=None)


def current_scope() -> Scope:
    """The scope of the RPC being served; an unresolved scope is an error, never a wildcard."""
    scope = _current_scope.get()
    if scope is None:
        raise Unauthenticated("no verified tenant for this call", reason="TENANT_UNRESOLVED")
    return scope


def current_token() -> str | None:
    """The caller's bearer token, forwarded on calls this RPC makes to other services."""
    return _current_token.get()


def bind_scope(scope: Scope | None, token: str | None) -> tuple[contextvars.Token, contextvars.Token]:
    return _current_scope.set(scope), _current_token.set(token)


def reset_scope(tokens: tuple[contextvars.Token, contextvars.Token]) -> None:
    _current_scope.reset(tokens[0])
    _current_token.reset(tokens[1])


# What a refused token is told, by a service or by the gateway (knowledge_gateway.local_replies).
TOKEN_MISSING_MESSAGE = "a bearer token is required"
TOKEN_EXPIRED_MESSAGE = "token expired; call again with a fresh token"
TOKEN_INVALID_MESSAGE = "token invalid"


def token_missing() -> Unauthenticated:
    return Unauthenticated(TOKEN_MISSING_MESSAGE, reason="TOKEN_MISSING")


def token_expired() -> Unauthenticated:
    """What an expired token is answered, at a call's start or when a stream outlives it."""
    return Unauthenticated(TOKEN_EXPIRED_MESSAGE, reason="TOKEN_EXPIRED")


class TokenVerifier:
    """Verifies bearer JWTs against a local JWKS file, the issuer and the audience."""

    def __init__(self, jwks: dict, *, issuer: str, audience: str) -> None:
        self._keys = {}
        for entry in jwks.get("keys", []):
            kid = entry.get("kid", "")
            self._keys[kid] = jwt.PyJWK(entry)
        if not self._keys:
            raise ValueError("the JWKS holds no keys")
        self._issuer = issuer
        self._audience = audience

    @classmethod
    def from_file(cls, path: Path, *, issuer: str, audience: str) -> TokenVerifier:
        return cls(json.loads(path.read_text()), issuer=issuer, audience=audience)

    def verify(self, token: str) -> Scope:
        try:
            header = jwt.get_unverified_header(token)
            key = self._keys.get(header.get("kid", "")) or (
                next(iter(self._keys.values())) if len(self._keys) == 1 else None
            )
            if key is None:
                raise Unauthenticated("token signed by an unknown key", reason="TOKEN_INVALID")
            claims = jwt.decode(
                token,
                key=key.key,
                # Only the algorithm of the key that was picked: a token naming another one (ES256
                # against an RSA key) is invalid, never a key-type error deep inside PyJWT.
                algorithms=[key.algorithm_name] if key.algorithm_name in ALGORITHMS else [],
                issuer=self._issuer,
                audience=self._audience,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise token_expired() from None
        except (jwt.PyJWTError, TypeError, ValueError):
            raise Unauthenticated(TOKEN_INVALID_MESSAGE, reason="TOKEN_INVALID") from None
        return scope_from_claims(claims)


def scope_from_claims(claims: dict) -> Scope:
    """The scope a verified token's claims grant; a claim of the wrong shape is UNAUTHENTICATED."""
    tenant = claims.get(TENANT_CLAIM)
    if not isinstance(tenant, str) or not tenant.strip():
        raise Unauthenticated("token carries no tenant", reason="TENANT_UNRESOLVED")
    subject = claims.get("sub", "")
    if not isinstance(subject, str):
        raise Unauthenticated("the token's sub claim must be a string", reason="TOKEN_INVALID")
    capabilities = _capabilities(claims.get(CAPABILITIES_CLAIM, []))
    for name, value in ((TENANT_CLAIM, tenant), ("sub", subject), *((CAPABILITIES_CLAIM, c) for c in capabilities)):
        if _CONTROL.search(value):
            raise Unauthenticated(f"the token's {name} claim holds a control character", reason="TOKEN_INVALID")
    if not is_service_subject(subject):
        capabilities = capabilities - frozenset(INTERNAL_CAPABILITIES)
    scope_claim, clearance, groups = _scope_claim(claims), _clearance(claims), _groups(claims)
    expiry = claims.get("exp")
    return Scope(
        tenant=tenant.strip(),
        capabilities=capabilities,
        subject=subject,
        scope_claim=scope_claim,
        clearance=clearance,
        # A number once verified (PyJWT checks it); a claim set built by hand may lack it.
        expires_at=float(expiry) if isinstance(expiry, int | float) and not isinstance(expiry, bool) else None,
        groups=groups,
    )


def _scope_claim(claims: dict) -> str | None:
    """The ``scope`` claim as sent (parsed and resolved only when a read needs it, so a token
    naming an unknown node still reaches the refusal that says so)."""
    raw = claims.get(SCOPE_CLAIM)
    if raw is None:
        return None
    if not isinstance(raw, str) or _CONTROL.search(raw):
        raise Unauthenticated("the token's scope claim must be a string naming a scope node", reason="TOKEN_INVALID")
    return raw


def _clearance(claims: dict) -> Band:
    raw = claims.get(CLEARANCE_CLAIM)
    if raw is None:
        return DEFAULT_CLEARANCE
    if not isinstance(raw, str):
        raise Unauthenticated("the token's clearance claim must be a band name", reason="TOKEN_INVALID")
    try:
        return parse_band(raw)
    except ValueError as error:
        raise Unauthenticated(f"the token's clearance claim: {error}", reason="TOKEN_INVALID") from None


def _groups(claims: dict) -> frozenset[str]:
    """The ``groups`` claim: a list of strings (empty ones ignored); any other shape, a control
    character or more than MAX_GROUPS is refused rather than read as something it is not."""
    raw = claims.get(GROUPS_CLAIM)
    if raw is None:
        return frozenset()
    if not isinstance(raw, list) or not all(isinstance(g, str) for g in raw):
        raise Unauthenticated("the token's groups claim must be a list of strings", reason="TOKEN_INVALID")
    if len(raw) > MAX_GROUPS or any(_CONTROL.search(g) for g in raw):
        raise Unauthenticated(
            f"the token's groups claim must name at most {MAX_GROUPS} groups without control characters",
            reason="TOKEN_INVALID",
        )
    return frozenset(g for g in raw if g)


def _capabilities(raw: object) -> frozenset[str]:
    """A list of strings, or one space-separated string; anything else (an object, a number,
    a list holding a non-string) is refused rather than read as something it is not."""
    if isinstance(raw, str):
        return frozenset(raw.split())
    if isinstance(raw, list) and all(isinstance(c, str) for c in raw):
        return frozenset(c for c in raw if c)
    raise Unauthenticated(
        "the token's capabilities claim must be a list of strings or a space-separated string",
        reason="TOKEN_INVALID",
    )


def bearer_token(metadata: Iterable[tuple[str, str | bytes]] | None) -> str | None:
    for key, value in metadata or ():
        if key.lower() == "authorization":
            text = value.decode() if isinstance(value, bytes) else value
            scheme, _, token = text.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    return None
