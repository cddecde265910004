"""What the gateway is configured with, and the names its bootstrap's parts share.

``GatewayConfig`` is one deployment's gateway (the CLI's stack builds one, ``knowledge_gateway.render``
another from ``KNOWLEDGE_*`` files); the constants are the paths, headers and limits that more
than one part of the bootstrap (routes, filters, local replies, Lua) must agree on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from knowledge_runtime.settings import DEFAULT_MAX_UPLOAD_BYTES, Env, SettingsError

from knowledge_gateway.console import SOURCE_DIR as CONSOLE_SOURCE_DIR
from knowledge_gateway.openapi import committed_path

REST_PREFIX = "/api/v1/knowledge"
JWT_PROVIDER = "knowledge"
JWT_FILTER = "envoy.filters.http.jwt_authn"
JWT_FAILURE_KEY = "jwt_failure"  # jwt_authn's dynamic metadata: why it refused a token ({code, message})
OPENAPI_PATH = f"{REST_PREFIX}/openapi.json"
# The verified tenant claim, copied by jwt_authn; a client-sent value is removed first.
TENANT_HEADER = "x-knowledge-tenant"
UNROUTED_HEADER = "x-knowledge-unrouted"
UPLOAD_PATH = f"{REST_PREFIX}/upload"
BODY_LIMIT_FILTER = "envoy.filters.http.body_size_limit"
# Every request's headers together (URL, bearer token and the rest): over this is 431. The services'
# gRPC metadata limit (knowledge_runtime.server.MAX_METADATA_BYTES) is above what Envoy forwards
# for a request under it (its headers, the original path again, a few of its own), so a request
# the gateway takes is never refused (or, between gRPC's soft and hard limits, sometimes refused)
# for its size upstream.
MAX_REQUEST_HEADERS_KB = 8
MAX_REQUEST_HEADERS = 100  # headers per request
# Headers the transcoder sets for the services and the access log: a client-sent copy is removed.
ORIGINAL_HEADERS = ("x-envoy-original-path", "x-envoy-original-method")
LOG_NAMESPACE = "knowledge.log"  # dynamic metadata the Lua filter writes for the access log
REPLY_NAMESPACE = "knowledge.reply"  # dynamic metadata: why the Lua filter refused a request, for its answer
HEALTHZ_PATH = "/healthz"  # readiness: 503 unless every upstream is SERVING
LIVEZ_PATH = "/livez"  # liveness: Envoy itself answers
HEALTH_CHECK_INTERVAL_S = 1


@dataclass(frozen=True)
class GatewayConfig:
    listen_host: str
    listen_port: int
    admin_port: int
    upstreams: dict[str, str]  # public process's registry name ("ingest", "mcp") -> host:port
    jwks_path: Path
    issuer: str
    audience: str
    descriptor_path: Path
    # The OpenAPI description Envoy reads at start and serves: a file, not inlined in the bootstrap.
    openapi_path: Path = field(default_factory=committed_path)
    max_body_bytes: int = DEFAULT_MAX_UPLOAD_BYTES
    request_timeout_s: int = 30
    upload_timeout_s: int = 600
    cors_origins: tuple[str, ...] = ()  # exact origins, e.g. "https://app.example.com"; none: no CORS
    rate_limit_rps: int = 50  # per tenant, refilled every second
    rate_limit_burst: int = 200  # per tenant, the bucket's size
    # A slow client (a byte a second) holds a connection only this long: its headers must arrive
    # within request_headers_timeout_s, its whole request (body included) within
    # request_body_timeout_s (default: the upload timeout), and a connection with no request open
    # closes after idle_timeout_s; a stream with no bytes either way is reset after
    # stream_idle_timeout_s (above the route timeouts, so a slow answer still comes).
    request_headers_timeout_s: int = 10
    request_body_timeout_s: int | None = None
    idle_timeout_s: int = 60
    stream_idle_timeout_s: int = 300
    # An HTTP process's path (/mcp): a tool call may wait for an ingestion or a document AI run.
    http_route_timeout_s: int = 120
    # A server stream (WatchDocuments, GET .../documents:watch) has no route timeout; one with
    # nothing sent either way for this long is closed, and its client watches again.
    watch_idle_timeout_s: int = 3600
    max_concurrent_streams: int = 100  # per HTTP/2 connection
    max_requests_per_connection: int = 10_000
    max_connections: int = 10_000  # every downstream connection of the gateway together
    # Where Envoy reads the web console's files (knowledge_gateway.console); None: no console.
    console_dir: Path | None = CONSOLE_SOURCE_DIR
    # The development sign-in (host:port), routed at /console/dev-token: only `knowledge up`,
    # on its development keys, has one.
    dev_sign_in_address: str | None = None


def parse_origins(value: str | None, name: str = "KNOWLEDGE_CORS_ORIGINS") -> tuple[str, ...]:
    """Comma-separated exact origins (``scheme://host[:port]``); empty or unset: none."""
    origins = tuple(part.strip().rstrip("/") for part in (value or "").split(",") if part.strip())
    for origin in origins:
        scheme, sep, rest = origin.partition("://")
        if scheme not in {"http", "https"} or not sep or not rest or "/" in rest or "*" in origin:
            raise SettingsError(f"{name}: {origin!r} is not an origin like https://app.example.com")
    return origins


def console_enabled(env: Env) -> bool:
    """``KNOWLEDGE_CONSOLE_ENABLED`` (default true): whether the gateway serves the web console."""
    return env.bool("CONSOLE_ENABLED", True)


def limits_from_env(env: Env) -> dict:
    """The gateway settings every deployment shares: CORS origins and the per-tenant rate limit."""
    return {
        "cors_origins": parse_origins(env.str("CORS_ORIGINS")),
        "rate_limit_rps": env.int("RATE_LIMIT_RPS", 50, minimum=1),
        "rate_limit_burst": env.int("RATE_LIMIT_BURST", 200, minimum=1),
    }
