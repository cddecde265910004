"""Typed settings read from ``KNOWLEDGE_*`` environment variables.

Every service builds one frozen settings dataclass at start through an :class:`Env`
reader; any invalid value raises :class:`SettingsError` naming the variable, and the
entry point turns that into a one-line message and exit status 2 before anything runs.
What every service has (where it listens, its database, auth, the upload cap, the metrics
port, its signing key) is :class:`CommonSettings`; each service's settings build on it.
A default that more than one process reads (the upload cap, the token issuer and audience)
is one constant here, read through one function, so the gateway, the CLI's stack and the
services cannot disagree.
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import platformdirs

from knowledge_runtime import registry

PREFIX = "KNOWLEDGE_"

DEFAULT_HTTP_PORT = 8080

DEFAULT_MAX_UPLOAD_BYTES = 100 * 1024 * 1024  # 100 MiB: a blob's cap, an upload's, the gateway's body limit
DEFAULT_JWT_ISSUER = "knowledge-dev"  # the development key's issuer (runtime.devkeys)
DEFAULT_JWT_AUDIENCE = "knowledge"


class SettingsError(ValueError):
    """A configuration value is missing or invalid; the message names the variable."""


class Env:
    """Reads and validates ``KNOWLEDGE_*`` variables from a mapping (``os.environ`` by default)."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = os.environ if environ is None else environ

    @property
    def environ(self) -> Mapping[str, str]:
        return self._environ

    def _raw(self, name: str) -> str | None:
        value = self._environ.get(PREFIX + name)
        if value is None or value.strip() == "":
            return None
        return value.strip()

    def str(self, name: str, default: str | None = None, *, required: bool = False) -> str | None:
        value = self._raw(name)
        if value is None:
            if required and default is None:
                raise SettingsError(f"{PREFIX}{name} is required but not set")
            return default
        return value

    # The methods are named after the types they read; inside the class those names are the
    # methods, so their annotations name the builtins.
    def int(
        self,
        name: builtins.str,
        default: builtins.int,
        *,
        minimum: builtins.int | None = None,
        maximum: builtins.int | None = None,
    ) -> builtins.int:
        value = self._raw(name)
        if value is None:
            return default
        try:
            number = int(value)
        except ValueError:
            raise SettingsError(f"{PREFIX}{name} must be an integer, got {value!r}") from None
        if minimum is not None and number < minimum:
            raise SettingsError(f"{PREFIX}{name} must be >= {minimum}, got {number}")
        if maximum is not None and number > maximum:
            raise SettingsError(f"{PREFIX}{name} must be <= {maximum}, got {number}")
        return number

    def float(
        self,
        name: builtins.str,
        default: builtins.float,
        *,
        minimum: builtins.float | None = None,
        maximum: builtins.float | None = None,
    ) -> builtins.float:
        value = self._raw(name)
        if value is None:
            return default
        try:
            number = float(value)
        except ValueError:
            raise SettingsError(f"{PREFIX}{name} must be a number, got {value!r}") from None
        if minimum is not None and number < minimum:
            raise SettingsError(f"{PREFIX}{name} must be >= {minimum}, got {number}")
        if maximum is not None and number > maximum:
            raise SettingsError(f"{PREFIX}{name} must be <= {maximum}, got {number}")
        return number

    def bool(self, name: builtins.str, default: builtins.bool) -> builtins.bool:
        value = self._raw(name)
        if value is None:
            return default
        lowered = value.lower()
        if lowered in {"1", "true", "yes", "on"}:
            return True
        if lowered in {"0", "false", "no", "off"}:
            return False
        raise SettingsError(f"{PREFIX}{name} must be true or false, got {value!r}")

    def choice(self, name: builtins.str, default: builtins.str, choices: tuple[builtins.str, ...]) -> builtins.str:
        value = self._raw(name)
        if value is None:
            return default
        if value not in choices:
            raise SettingsError(f"{PREFIX}{name} must be one of {', '.join(choices)}, got {value!r}")
        return value

    def path(self, name: builtins.str, default: Path | None = None) -> Path | None:
        value = self._raw(name)
        return Path(value).expanduser() if value is not None else default

    def port(self, name: builtins.str, default: builtins.int) -> builtins.int:
        return self.int(name, default, minimum=0, maximum=65535)


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("knowledge", appauthor=False))


def max_upload_bytes(env: Env) -> int:
    """``KNOWLEDGE_MAX_UPLOAD_BYTES``: the cap of one upload, blob and gateway request body."""
    return env.int("MAX_UPLOAD_BYTES", DEFAULT_MAX_UPLOAD_BYTES, minimum=1)


def jwt_issuer(env: Env) -> str:
    return env.str("JWT_ISSUER", DEFAULT_JWT_ISSUER) or DEFAULT_JWT_ISSUER


def jwt_audience(env: Env) -> str:
    return env.str("JWT_AUDIENCE", DEFAULT_JWT_AUDIENCE) or DEFAULT_JWT_AUDIENCE


def metrics_port(env: Env) -> int:
    """``KNOWLEDGE_METRICS_PORT``: where ``/metrics`` listens; 0 (the default) turns it off."""
    return env.port("METRICS_PORT", 0)


def tenants_enabled_by_default(env: Env) -> bool:
    """``KNOWLEDGE_TENANTS_ENABLED_BY_DEFAULT``: true (the embedded stack, development); the
    production overlay sets false, so only tenants an operator enabled are served."""
    return env.bool("TENANTS_ENABLED_BY_DEFAULT", True)


@dataclass(frozen=True, slots=True)
class ServiceKey:
    """The private key a service signs its internal calls with (runtime ``service_tokens``).

    ``KNOWLEDGE_SERVICE_KEY_PATH`` (PEM, unencrypted; RSA or EC), its public half in the JWKS
    under ``KNOWLEDGE_SERVICE_KEY_ID``. Never shown by repr.
    """

    private_pem: bytes = field(repr=False)
    key_id: str | None
    algorithm: str = "RS256"

    @classmethod
    def from_env(cls, env: Env | None = None) -> ServiceKey:
        env = env or Env()
        key = cls.optional(env)
        if key is None:
            raise SettingsError(
                "KNOWLEDGE_SERVICE_KEY_PATH is required (the key this service signs internal calls with)"
            )
        return key

    @classmethod
    def optional(cls, env: Env) -> ServiceKey | None:
        """The key when ``KNOWLEDGE_SERVICE_KEY_PATH`` is set (and usable), else None."""
        path = env.path("SERVICE_KEY_PATH")
        if path is None:
            return None
        # imported here: the embedder's encoder and batching import this module, and a GPU node
        # that runs them from a bundle (bench/bundle.py) need not carry cryptography
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.serialization import load_pem_private_key

        try:
            pem = Path(path).read_bytes()
        except OSError as error:
            raise SettingsError(f"KNOWLEDGE_SERVICE_KEY_PATH: cannot read {path} ({error.strerror})") from None
        try:
            key = load_pem_private_key(pem, password=None)
        except (ValueError, TypeError):
            raise SettingsError(f"KNOWLEDGE_SERVICE_KEY_PATH: {path} is not an unencrypted PEM private key") from None
        algorithm = "ES256" if isinstance(key, ec.EllipticCurvePrivateKey) else "RS256"
        return cls(private_pem=pem, key_id=env.str("SERVICE_KEY_ID"), algorithm=algorithm)


@dataclass(frozen=True, slots=True)
class CommonSettings:
    """What every service reads: where it listens, its database, auth, limits and telemetry."""

    service: str
    host: str
    port: int
    data_dir: Path
    database_url: str | None
    jwks_path: Path
    jwt_issuer: str
    jwt_audience: str
    otlp_endpoint: str | None
    log_level: str
    shutdown_grace_s: float
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES
    metrics_port: int = 0  # 0: no /metrics
    # The key this service signs internal calls with; None when KNOWLEDGE_SERVICE_KEY_PATH is unset.
    service_key: ServiceKey | None = field(default=None, repr=False)
    readiness_interval_s: float = 1.0  # how often readiness checks the service's hard dependencies
    # Whether a tenant no operator has configured (no tenant_settings row) may use the service.
    tenants_enabled_by_default: bool = True
    grpc_reflection: bool = True  # KNOWLEDGE_GRPC_REFLECTION: serve reflection (behind the token)

    @classmethod
    def from_env(cls, service: str, env: Env | None = None) -> CommonSettings:
        env = env or Env()
        entry = registry.service(service)
        data_dir = env.path("DATA_DIR", default_data_dir())
        assert data_dir is not None
        jwks_path = env.path("JWKS_PATH", data_dir / "keys" / "jwks.json")
        assert jwks_path is not None
        return cls(
            service=service,
            host=env.str("HOST", "127.0.0.1") or "127.0.0.1",
            port=env.port(entry.port_setting, entry.port),
            data_dir=data_dir,
            database_url=env.str("DATABASE_URL"),
            jwks_path=jwks_path,
            jwt_issuer=jwt_issuer(env),
            jwt_audience=jwt_audience(env),
            otlp_endpoint=env.str("OTLP_ENDPOINT"),
            log_level=env.choice("LOG_LEVEL", "info", ("debug", "info", "warning", "error")),
            shutdown_grace_s=env.float("SHUTDOWN_GRACE_S", 10.0, minimum=0.0),
            max_upload_bytes=max_upload_bytes(env),
            metrics_port=metrics_port(env),
            service_key=ServiceKey.optional(env),
            readiness_interval_s=env.float("READINESS_INTERVAL_S", 1.0, minimum=0.1),
            tenants_enabled_by_default=tenants_enabled_by_default(env),
            grpc_reflection=env.bool("GRPC_REFLECTION", True),
        )


def service_address(service: str, env: Env | None = None) -> str:
    """Where a caller reaches another service: ``KNOWLEDGE_<SERVICE>_ADDRESS`` or the local default."""
    env = env or Env()
    entry = registry.service(service)
    default = f"127.0.0.1:{env.port(entry.port_setting, entry.port)}"
    return env.str(entry.address_setting, default) or default
