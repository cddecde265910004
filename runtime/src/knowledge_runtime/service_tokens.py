"""Short-lived tokens a service signs for its own calls to internal services.

A background job (an ingest worker reading a blob, embedding chunks) has no caller's token,
and a user's token rightly lacks the internal capabilities (``blob.write``, ``embed``). The
calling service therefore signs a token for the tenant it works for, with exactly the
capabilities it needs, using its key (``KNOWLEDGE_SERVICE_KEY_PATH``, PEM; its public half
must be in the JWKS the services verify with, under ``KNOWLEDGE_SERVICE_KEY_ID``).
In the embedded stack this is the development key.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping

import jwt

from knowledge_runtime.auth import CAPABILITIES_CLAIM, TENANT_CLAIM
from knowledge_runtime.settings import CommonSettings, ServiceKey, SettingsError

DEFAULT_TTL_S = 300
_FIXED = frozenset({"iss", "aud", "sub", "iat", "exp", TENANT_CLAIM, CAPABILITIES_CLAIM})


class ServiceTokenSigner:
    """Signs and caches ``{tenant, capabilities}`` tokens until most of their lifetime is used."""

    def __init__(self, key: ServiceKey, *, issuer: str, audience: str, subject: str, ttl_s: int = DEFAULT_TTL_S):
        self._key = key
        self._issuer = issuer
        self._audience = audience
        self._subject = subject
        self._ttl_s = ttl_s
        self._cache: dict[tuple[str, tuple[str, ...], tuple[tuple[str, str], ...]], tuple[float, str]] = {}
        self._lock = threading.Lock()
        try:
            self.token("startup-check", ())
        except (ValueError, TypeError, jwt.PyJWTError) as error:
            raise SettingsError(
                f"KNOWLEDGE_SERVICE_KEY_PATH: not a usable signing key ({type(error).__name__})"
            ) from None

    @classmethod
    def for_service(cls, common: CommonSettings) -> ServiceTokenSigner:
        """The signer of ``common.service``, with the key of its settings (required here)."""
        if common.service_key is None:
            raise SettingsError(
                f"KNOWLEDGE_SERVICE_KEY_PATH is required (the key {common.service} signs internal calls with)"
            )
        return cls(
            common.service_key,
            issuer=common.jwt_issuer,
            audience=common.jwt_audience,
            subject=f"service:{common.service}",
        )

    def token(self, tenant: str, capabilities: Iterable[str], claims: Mapping[str, str] | None = None) -> str:
        """``claims``: more of them, e.g. the ``scope`` and ``clearance`` a call reads with when a
        service searches on an operator's behalf (never the tenant, subject or capabilities)."""
        extra = tuple(sorted((claims or {}).items()))
        if any(name in _FIXED for name, _ in extra):
            raise ValueError("extra claims never replace the tenant, subject or capabilities")
        key = (tenant, tuple(sorted(capabilities)), extra)
        now = time.time()
        with self._lock:
            cached = self._cache.get(key)
            if cached and cached[0] > now:
                return cached[1]
            signed: dict[str, object] = {
                **dict(extra),
                "iss": self._issuer,
                "aud": self._audience,
                "sub": self._subject,
                "iat": int(now),
                "exp": int(now) + self._ttl_s,
                TENANT_CLAIM: tenant,
                CAPABILITIES_CLAIM: list(key[1]),
            }
            headers = {"kid": self._key.key_id} if self._key.key_id else None
            token = jwt.encode(signed, self._key.private_pem, algorithm=self._key.algorithm, headers=headers)
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[key] = (now + self._ttl_s * 0.8, token)
            return token

    def metadata(
        self, tenant: str, capabilities: Iterable[str], claims: Mapping[str, str] | None = None
    ) -> list[tuple[str, str]]:
        return [("authorization", f"Bearer {self.token(tenant, capabilities, claims)}")]
