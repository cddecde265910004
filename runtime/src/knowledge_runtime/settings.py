"""Typed settings read from ``KNOWLEDGE_*`` environment variables.

Every service builds one frozen settings dataclass at start through an :class:`Env`
reader; any invalid value raises :class:`SettingsError` naming the variable, and the
entry point turns that into a one-line message and exit status 2 before anything runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import platformdirs

PREFIX = "KNOWLEDGE_"

# Default gRPC ports of the embedded stack; each one is configurable so that two stacks
# can run side by side.
DEFAULT_PORTS = {
    "content-index": 50151,
    "embedder": 50152,
    "ingest": 50153,
    "search": 50154,
}
DEFAULT_HTTP_PORT = 8080


class SettingsError(ValueError):
    """A configuration value is missing or invalid; the message names the variable."""


class Env:
    """Reads and validates ``KNOWLEDGE_*`` variables from a mapping (``os.environ`` by default)."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = os.environ if environ is None else environ

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

    def int(self, name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
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

    def float(self, name: str, default: float, *, minimum: float | None = None) -> float:
        value = self._raw(name)
        if value is None:
            return default
        try:
            number = float(value)
        except ValueError:
            raise SettingsError(f"{PREFIX}{name} must be a number, got {value!r}") from None
        if minimum is not None and number < minimum:
            raise SettingsError(f"{PREFIX}{name} must be >= {minimum}, got {number}")
        return number

    def bool(self, name: str, default: bool) -> bool:
        value = self._raw(name)
        if value is None:
            return default
        lowered = value.lower()
        if lowered in {"1", "true", "yes", "on"}:
            return True
        if lowered in {"0", "false", "no", "off"}:
            return False
        raise SettingsError(f"{PREFIX}{name} must be true or false, got {value!r}")

    def choice(self, name: str, default: str, choices: tuple[str, ...]) -> str:
        value = self._raw(name)
        if value is None:
            return default
        if value not in choices:
            raise SettingsError(f"{PREFIX}{name} must be one of {', '.join(choices)}, got {value!r}")
        return value

    def path(self, name: str, default: Path | None = None) -> Path | None:
        value = self._raw(name)
        return Path(value).expanduser() if value is not None else default

    def port(self, name: str, default: int) -> int:
        return self.int(name, default, minimum=0, maximum=65535)


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("knowledge", appauthor=False))


@dataclass(frozen=True, slots=True)
class CommonSettings:
    """What every service reads: where it listens, its database, auth and telemetry."""

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

    @classmethod
    def from_env(cls, service: str, env: Env | None = None) -> CommonSettings:
        env = env or Env()
        key = service.upper().replace("-", "_")
        data_dir = env.path("DATA_DIR", default_data_dir())
        assert data_dir is not None
        jwks_path = env.path("JWKS_PATH", data_dir / "keys" / "jwks.json")
        assert jwks_path is not None
        return cls(
            service=service,
            host=env.str("HOST", "127.0.0.1") or "127.0.0.1",
            port=env.port(f"{key}_PORT", DEFAULT_PORTS[service]),
            data_dir=data_dir,
            database_url=env.str("DATABASE_URL"),
            jwks_path=jwks_path,
            jwt_issuer=env.str("JWT_ISSUER", "knowledge-dev") or "knowledge-dev",
            jwt_audience=env.str("JWT_AUDIENCE", "knowledge") or "knowledge",
            otlp_endpoint=env.str("OTLP_ENDPOINT"),
            log_level=env.choice("LOG_LEVEL", "info", ("debug", "info", "warning", "error")),
            shutdown_grace_s=env.float("SHUTDOWN_GRACE_S", 10.0, minimum=0.0),
        )


def service_address(service: str, env: Env | None = None) -> str:
    """Where a caller reaches another service: ``KNOWLEDGE_<SERVICE>_ADDRESS`` or the local default."""
    env = env or Env()
    key = service.upper().replace("-", "_")
    default = f"127.0.0.1:{env.port(f'{key}_PORT', DEFAULT_PORTS[service])}"
    return env.str(f"{key}_ADDRESS", default) or default
