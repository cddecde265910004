"""Render Envoy's bootstrap for the REST API.

REST ``/api/v1/knowledge/*`` is transcoded to gRPC by ``grpc_json_transcoder`` from the
descriptor set (paths from the ``google.api.http`` annotations, proto field names kept,
gRPC statuses converted to HTTP + JSON). ``jwt_authn`` verifies the bearer token against a
local JWKS (issuer, audience, expiry) and forwards it, so the services verify it again and
read the tenant and capabilities from it.

Around that: CORS for the configured frontend origins, a token bucket per tenant (the
verified ``tenant`` claim copied to a header by ``jwt_authn``) answering 429 with
``Retry-After``, a body limit equal to the upload cap (413 from the Content-Length before a
byte of the body is read; a body without one is counted as it streams, here or, for an upload,
by ingest, and answered the same 413), local replies (401, 404, 413, 429, ...) as JSON
``google.rpc.Status`` objects like the services' errors, and the OpenAPI description at
``/api/v1/knowledge/openapi.json``.

Hardening: the token is read from ``Authorization: Bearer`` only (never a query parameter); a
JSON body's unknown fields (which the transcoder would drop) are a 400 from Lua; headers over
MAX_REQUEST_HEADERS_KB are a 431, below the services' gRPC metadata limit; a rate-limited gRPC
caller gets RESOURCE_EXHAUSTED; header, request, idle and stream timeouts and connection limits
cut slow clients off; the access log has the client's method and no query-string values.

Health: ``/livez`` answers 200 while Envoy runs (liveness); ``/healthz`` answers 200 only while
every upstream reports its named gRPC health service SERVING, checked by Envoy every
``HEALTH_CHECK_INTERVAL_S`` (readiness: a service whose database is down is NOT_SERVING), else 503.
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from google.api import annotations_pb2
from google.protobuf.descriptor import Descriptor, MethodDescriptor
from knowledge_runtime.registry import ServiceEntry, public_services, serving
from knowledge_runtime.settings import DEFAULT_MAX_UPLOAD_BYTES, Env, SettingsError

from knowledge_gateway.descriptors import (
    descriptor_bytes,
    http_rules,
    public_method,
    public_service_names,
    streamed_methods,
)
from knowledge_gateway.openapi import committed_path

REST_PREFIX = "/api/v1/knowledge"
JWT_PROVIDER = "knowledge"
OPENAPI_PATH = f"{REST_PREFIX}/openapi.json"
# The verified tenant claim, copied by jwt_authn; a client-sent value is removed first.
TENANT_HEADER = "x-knowledge-tenant"
UNROUTED_HEADER = "x-knowledge-unrouted"
UPLOAD_PATH = f"{REST_PREFIX}/upload"
BODY_LIMIT_FILTER = "envoy.filters.http.body_size_limit"
# Ingest's reason for an upload that crossed the cap while streaming (RESOURCE_EXHAUSTED, so 429).
UPLOAD_TOO_LARGE = "UPLOAD_TOO_LARGE"
MAX_ERROR_BODY_BYTES = 64 * 1024  # the most of a 429 answer the Lua filter reads to find that reason
MAX_DYNAMIC_DESCRIPTORS = 10_000  # tenants with a live bucket; the least recently seen is evicted
# Every request's headers together (URL, bearer token and the rest): over this is 431. The services'
# gRPC metadata limit (knowledge_runtime.server.MAX_METADATA_BYTES) is above what Envoy forwards
# for a request under it (its headers, the original path again, a few of its own), so a request
# the gateway takes is never refused (or, between gRPC's soft and hard limits, sometimes refused)
# for its size upstream.
MAX_REQUEST_HEADERS_KB = 8
MAX_REQUEST_HEADERS = 100  # headers per request
RATE_LIMITED_MESSAGE = "the tenant's request rate is over its limit; retry after 1 second"
HEADERS_TOO_LARGE_MESSAGE = (
    f"request headers too large: the URL, the bearer token and the other headers "
    f"must fit in {MAX_REQUEST_HEADERS_KB} KiB together"
)
# Headers the transcoder sets for the services and the access log: a client-sent copy is removed.
ORIGINAL_HEADERS = ("x-envoy-original-path", "x-envoy-original-method")
LOG_NAMESPACE = "knowledge.log"  # dynamic metadata the Lua filter writes for the access log
_HCM = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
HEALTHZ_PATH = "/healthz"  # readiness: 503 unless every upstream is SERVING
LIVEZ_PATH = "/livez"  # liveness: Envoy itself answers
HEALTH_CHECK_INTERVAL_S = 1
# A value the Python side fills into the Lua files (@NAME@: not Lua syntax, so never a clash).
_LUA_PLACEHOLDER = re.compile(r"@([A-Z_]+)@")


@dataclass(frozen=True)
class GatewayConfig:
    listen_host: str
    listen_port: int
    admin_port: int
    upstreams: dict[str, str]  # public service's registry name ("ingest") -> host:port
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
    # A server stream (WatchDocuments, GET .../documents:watch) has no route timeout; one with
    # nothing sent either way for this long is closed, and its client watches again.
    watch_idle_timeout_s: int = 3600
    max_concurrent_streams: int = 100  # per HTTP/2 connection
    max_requests_per_connection: int = 10_000
    max_connections: int = 10_000  # every downstream connection of the gateway together


def parse_origins(value: str | None, name: str = "KNOWLEDGE_CORS_ORIGINS") -> tuple[str, ...]:
    """Comma-separated exact origins (``scheme://host[:port]``); empty or unset: none."""
    origins = tuple(part.strip().rstrip("/") for part in (value or "").split(",") if part.strip())
    for origin in origins:
        scheme, sep, rest = origin.partition("://")
        if scheme not in {"http", "https"} or not sep or not rest or "/" in rest or "*" in origin:
            raise SettingsError(f"{name}: {origin!r} is not an origin like https://app.example.com")
    return origins


def limits_from_env(env: Env) -> dict:
    """The gateway settings every deployment shares: CORS origins and the per-tenant rate limit."""
    return {
        "cors_origins": parse_origins(env.str("CORS_ORIGINS")),
        "rate_limit_rps": env.int("RATE_LIMIT_RPS", 50, minimum=1),
        "rate_limit_burst": env.int("RATE_LIMIT_BURST", 200, minimum=1),
    }


def write_descriptor_set(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(descriptor_bytes())
    return path


def _cluster_name(entry: ServiceEntry) -> str:
    """One cluster per upstream process, named after its readiness service ("ingestservice")."""
    return entry.health_name.rsplit(".", 1)[-1].lower()


def _cluster(entry: ServiceEntry, address: str) -> dict:
    host, _, port = address.rpartition(":")
    try:
        ipaddress.ip_address(host)
        discovery = "STATIC"
    except ValueError:
        discovery = "STRICT_DNS"  # a Kubernetes Service name
    return {
        "name": _cluster_name(entry),
        "type": discovery,
        "connect_timeout": "2s",
        # The named health service is the upstream's readiness (see knowledge_runtime.health);
        # checked at the same pace with or without traffic, so /healthz is never stale.
        "health_checks": [
            {
                "timeout": "1s",
                "interval": f"{HEALTH_CHECK_INTERVAL_S}s",
                "no_traffic_interval": f"{HEALTH_CHECK_INTERVAL_S}s",
                "unhealthy_threshold": 1,
                "healthy_threshold": 1,
                "grpc_health_check": {"service_name": entry.health_name},
            }
        ],
        "typed_extension_protocol_options": {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                "explicit_http_config": {"http2_protocol_options": {}},
            }
        },
        "load_assignment": {
            "cluster_name": _cluster_name(entry),
            "endpoints": [
                {
                    "lb_endpoints": [
                        {"endpoint": {"address": {"socket_address": {"address": host, "port_value": int(port)}}}}
                    ]
                }
            ],
        },
    }


def _grpc_path(method: MethodDescriptor) -> str:
    return f"/{method.containing_service.full_name}/{method.name}"


def _method_cluster(method: MethodDescriptor) -> str:
    return _cluster_name(serving(method.containing_service.full_name))


# On a route: the body limit filter leaves its requests alone (see _body_limit).
_WITHOUT_BODY_LIMIT = {
    "typed_per_filter_config": {
        BODY_LIMIT_FILTER: {"@type": "type.googleapis.com/envoy.config.route.v3.FilterConfig", "disabled": True}
    }
}


def _routes(config: GatewayConfig) -> list[dict]:
    upload_rpc, batch_rpc = public_method("UploadDocument"), public_method("BatchIngestTexts")
    json_header = [
        {"header": {"key": "content-type", "value": "application/json"}, "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}
    ]
    routes: list[dict] = [
        # /healthz is answered by the health_check filter before routing (see _http_filters).
        {"match": {"path": LIVEZ_PATH}, "direct_response": {"status": 200, "body": {"inline_string": "ok\n"}}},
        {
            "match": {
                "path": OPENAPI_PATH,
                "headers": [{"name": ":method", "string_match": {"safe_regex": {"regex": "GET|HEAD"}}}],
            },
            "direct_response": {"status": 200, "body": {"filename": str(config.openapi_path)}},
            "response_headers_to_add": json_header,
        },
        # After transcoding the path is the gRPC method's; uploads get the long timeout. A gRPC
        # client's call through the gateway (these routes before transcoding) is not counted by
        # the body limit: its messages are capped by the service.
        {
            "match": {"path": _grpc_path(upload_rpc)},
            "route": {"cluster": _method_cluster(upload_rpc), "timeout": f"{config.upload_timeout_s}s"},
            **_WITHOUT_BODY_LIMIT,
        },
        # POST /texts:batch writes up to 1,000 durable jobs before it answers: on a loaded 2-core
        # machine 865 texts took over the 30 s request timeout (a 504 while the service went on
        # accepting them), so it gets the upload timeout too; the body limit still applies.
        {
            "match": {"path": _grpc_path(batch_rpc)},
            "route": {"cluster": _method_cluster(batch_rpc), "timeout": f"{config.upload_timeout_s}s"},
        },
    ]
    # A server stream answers as long as its client listens (a watch): no route timeout. A quiet
    # WatchEvents still sends a heartbeat (KNOWLEDGE_EVENTS_HEARTBEAT_S, below the idle timeout),
    # so a stream whose client or service is gone is still reset by the idle timeout.
    for method in streamed_methods():
        routes.append(
            {
                "match": {"path": _grpc_path(method)},
                "route": {
                    "cluster": _method_cluster(method),
                    "timeout": "0s",
                    "idle_timeout": f"{config.watch_idle_timeout_s}s",
                },
                **_WITHOUT_BODY_LIMIT,
            }
        )
    # Every gRPC service a public process serves goes to that process.
    for entry in public_services():
        for service in entry.grpc_services:
            routes.append(
                {
                    "match": {"prefix": f"/{service}/"},
                    "route": {"cluster": _cluster_name(entry), "timeout": f"{config.request_timeout_s}s"},
                    **_WITHOUT_BODY_LIMIT,
                }
            )
    routes.extend(_method_not_allowed_routes())
    # A path the transcoder did not turn into an RPC: 404. It is a route entry, not a direct
    # response, because filters before the transcoder (CORS, jwt_authn) only apply their policies
    # on one; it names its cluster by a header that Lua removes from every request, so it never
    # reaches a cluster and Envoy answers 404 itself. Every REST path matches it before it is
    # transcoded (and routed again); the REST upload has its own copy that is not counted by the
    # body limit (see _body_limit).
    unrouted = {"cluster_header": UNROUTED_HEADER}
    upload = {
        "safe_regex": {"regex": re.escape(UPLOAD_PATH) + "/?"},  # the transcoder takes "upload/" too
        "headers": [{"name": ":method", "string_match": {"exact": "POST"}}],
    }
    routes.append({"match": upload, "route": unrouted, **_WITHOUT_BODY_LIMIT})
    # Lua reads a JSON body whole to check its fields (see _lua_source): up to the cap.
    routes.append(
        {"match": {"prefix": "/"}, "route": unrouted, "per_request_buffer_limit_bytes": config.max_body_bytes}
    )
    return routes


def rest_methods() -> dict[str, list[str]]:
    """REST path template -> its HTTP methods, from the google.api.http rules."""
    paths: dict[str, list[str]] = {}
    for _, verb, template in http_rules():
        paths.setdefault(template, []).append(verb.upper())
    return paths


def _path_regex(template: str) -> str:
    return "".join(
        "[^/:]+" if part.startswith("{") else re.escape(part)  # ":verb" is not an id
        for part in re.split(r"(\{[^}]+\})", template)
    )


def _query_method_mappers() -> list[dict]:
    """405 with ``Allow`` for QUERY on a REST path, as for any other method it lacks. Envoy refuses
    a QUERY request without a Content-Type (400) before routing, so the 405 route never sees it:
    that local reply is rewritten here instead."""
    mappers = []
    for template, methods in sorted(rest_methods().items()):
        allowed = ", ".join(sorted(set(methods)))
        code, reason = _LOCAL_REPLIES[405]
        mappers.append(
            {
                "filter": {
                    "and_filter": {
                        "filters": [
                            {
                                "status_code_filter": {
                                    "comparison": {
                                        "op": "EQ",
                                        "value": {
                                            "default_value": 400,
                                            "runtime_key": "knowledge.local_reply.query_400",
                                        },
                                    }
                                }
                            },
                            {"header_filter": {"header": {"name": ":method", "string_match": {"exact": "QUERY"}}}},
                            {
                                "header_filter": {
                                    "header": {
                                        "name": ":path",
                                        "string_match": {"safe_regex": {"regex": _path_regex(template) + r"(\?.*)?"}},
                                    }
                                }
                            },
                        ]
                    }
                },
                "status_code": 405,
                "headers_to_add": [
                    {"header": {"key": "allow", "value": allowed}, "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}
                ],
                "body_format_override": {
                    "json_format": _status_json(code, reason, f"{template} allows {allowed}"),
                    "content_type": "application/json",
                },
            }
        )
    return mappers


def _method_not_allowed_routes() -> list[dict]:
    """405 with ``Allow`` for a REST path asked with a method it does not have. Its own methods and
    OPTIONS (CORS preflights) fall through to the catch-all route entry and the transcoder."""
    routes = []
    for template, methods in sorted(rest_methods().items()):
        regex = _path_regex(template)
        allowed = sorted(set(methods))
        routes.append(
            {
                "match": {
                    "safe_regex": {"regex": regex},
                    "headers": [
                        {
                            "name": ":method",
                            "invert_match": True,
                            "string_match": {"safe_regex": {"regex": "|".join([*allowed, "OPTIONS"])}},
                        }
                    ],
                },
                "direct_response": {
                    "status": 405,
                    "body": {"inline_string": f"{template} allows {', '.join(allowed)}"},
                },
                "response_headers_to_add": [
                    {
                        "header": {"key": "allow", "value": ", ".join(allowed)},
                        "append_action": "OVERWRITE_IF_EXISTS_OR_ADD",
                    }
                ],
            }
        )
    return routes


def _virtual_host(config: GatewayConfig) -> dict:
    host: dict = {
        "name": "knowledge",
        "domains": ["*"],
        "routes": _routes(config),
    }
    if config.cors_origins:
        host["typed_per_filter_config"] = {
            "envoy.filters.http.cors": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy",
                "allow_origin_string_match": [{"exact": origin} for origin in config.cors_origins],
                "allow_methods": "GET, POST, DELETE, OPTIONS",
                "allow_headers": "authorization, content-type, traceparent, x-request-id",
                "expose_headers": "retry-after, x-request-id, x-ratelimit-limit, x-ratelimit-remaining, x-ratelimit-reset",
                "max_age": "600",
            }
        }
    return host


def _access_log() -> dict:
    """One JSON line per request. The method and path are the client's (the transcoder keeps them
    in x-envoy-original-*, which Lua removes from the client's request first; a REST GET is logged
    GET, not the upstream gRPC POST). The path has no query string: its values (an uploaded
    file's name, an id, a credential a client put there) never reach the log; ``query`` lists
    the parameter names only."""
    fields = {
        "time": "%START_TIME%",
        "method": "%REQ(X-ENVOY-ORIGINAL-METHOD?:METHOD)%",
        "path": "%REQ_WITHOUT_QUERY(X-ENVOY-ORIGINAL-PATH?:PATH)%",
        "query": f"%DYNAMIC_METADATA({LOG_NAMESPACE}:query)%",
        "grpc_method": "%REQ_WITHOUT_QUERY(:PATH)%",
        "status": "%RESPONSE_CODE%",
        "grpc_status": "%GRPC_STATUS%",
        "flags": "%RESPONSE_FLAGS%",
        "bytes_in": "%BYTES_RECEIVED%",
        "bytes_out": "%BYTES_SENT%",
        "duration_ms": "%DURATION%",
        "request_id": "%REQ(X-REQUEST-ID)%",
        "traceparent": "%REQ(TRACEPARENT)%",
        "tenant": f"%REQ({TENANT_HEADER.upper()})%",
        # Never the Authorization header, a query value nor any body: tokens, file names and
        # documents stay out of logs.
    }
    return {
        "name": "envoy.access_loggers.stdout",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog",
            "log_format": {
                "json_format": fields,
                "formatters": [
                    {
                        "name": "envoy.formatter.req_without_query",
                        "typed_config": {
                            "@type": "type.googleapis.com/envoy.extensions.formatter.req_without_query.v3.ReqWithoutQuery"
                        },
                    }
                ],
            },
        },
    }


# google.rpc.Code of each HTTP status Envoy itself answers with, and the ErrorInfo reason.
_LOCAL_REPLIES = {
    400: (3, "INVALID_REQUEST"),
    401: (16, "UNAUTHENTICATED"),
    404: (5, "NOT_FOUND"),
    405: (12, "METHOD_NOT_ALLOWED"),
    413: (8, "REQUEST_TOO_LARGE"),
    429: (8, "RATE_LIMITED"),
    431: (3, "HEADERS_TOO_LARGE"),
    500: (13, "INTERNAL"),
    502: (14, "UPSTREAM_UNAVAILABLE"),
    503: (14, "UPSTREAM_UNAVAILABLE"),
    504: (4, "UPSTREAM_TIMEOUT"),
}


def _status_json(code: int, reason: str, message: str) -> dict:
    return {
        "code": code,
        "message": message,
        "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": "knowledge.v1"}],
    }


def _local_reply_config(config: GatewayConfig) -> dict:
    """Envoy's own answers (401 from jwt_authn, 429, 413, no route...) as google.rpc.Status JSON.
    Every 413 (Lua's from the Content-Length, the body limit's while streaming) says the same."""
    messages = {
        413: too_large_message(config.max_body_bytes),
        429: RATE_LIMITED_MESSAGE,
        431: HEADERS_TOO_LARGE_MESSAGE,
    }
    # A gRPC caller's own request; a transcoded REST one has the gRPC content type too once the
    # transcoder has seen it, and the original path the transcoder keeps (see _lua_source).
    grpc_request = {
        "and_filter": {
            "filters": [
                {"header_filter": {"header": {"name": "content-type", "string_match": {"prefix": "application/grpc"}}}},
                {
                    "header_filter": {
                        "header": {"name": ORIGINAL_HEADERS[0], "present_match": True, "invert_match": True}
                    }
                },
            ]
        }
    }
    mappers = [
        {
            # A gRPC caller through the gateway gets its status with a plain message, not JSON.
            "filter": {
                "and_filter": {
                    "filters": [
                        *grpc_request["and_filter"]["filters"],
                        {
                            "status_code_filter": {
                                "comparison": {
                                    "op": "EQ",
                                    "value": {"default_value": 429, "runtime_key": "knowledge.local_reply.grpc_429"},
                                }
                            }
                        },
                    ]
                }
            },
            "body_format_override": {"text_format": RATE_LIMITED_MESSAGE},
        },
        {
            "filter": grpc_request,
            "body_format_override": {"text_format": "%LOCAL_REPLY_BODY%"},
        },
        {
            # The catch-all route's missing cluster ("NC"): a path the API does not have.
            "filter": {"response_flag_filter": {"flags": ["NC"]}},
            "status_code": 404,
            "body_format_override": {
                "json_format": _status_json(5, "NOT_FOUND", "no such REST resource"),
                "content_type": "application/json",
            },
        },
        {
            # Envoy answers 403 itself only from jwt_authn (a token for another audience): a token
            # this API does not accept is 401. The services' own 403s are upstream answers, untouched.
            "filter": {
                "status_code_filter": {
                    "comparison": {
                        "op": "EQ",
                        "value": {"default_value": 403, "runtime_key": "knowledge.local_reply.403"},
                    }
                }
            },
            "status_code": 401,
            "body_format_override": {
                "json_format": _status_json(16, "UNAUTHENTICATED", "%LOCAL_REPLY_BODY%"),
                "content_type": "application/json",
            },
        },
        *_query_method_mappers(),
    ]
    for status, (code, reason) in _LOCAL_REPLIES.items():
        mappers.append(
            {
                "filter": {
                    "status_code_filter": {
                        "comparison": {
                            "op": "EQ",
                            "value": {"default_value": status, "runtime_key": f"knowledge.local_reply.{status}"},
                        }
                    }
                },
                "body_format_override": {
                    "json_format": _status_json(code, reason, messages.get(status, "%LOCAL_REPLY_BODY%")),
                    "content_type": "application/json",
                },
            }
        )
    return {"mappers": mappers}


def too_large_message(max_body_bytes: int) -> str:
    return f"request body larger than {max_body_bytes} bytes"


def too_large_json(max_body_bytes: int) -> str:
    """The body of every 413, as the 413 local-reply mapper writes it."""
    code, reason = _LOCAL_REPLIES[413]
    return json.dumps(_status_json(code, reason, too_large_message(max_body_bytes)), separators=(",", ":"))


def _body_limit(config: GatewayConfig) -> dict:
    """The upload cap on a body sent without a Content-Length (chunked), counted as it streams.

    Lua refuses a body from its Content-Length before reading it; a chunked body has none, and
    Lua cannot answer once it has let the headers through to read the body. For a REST call that
    the transcoder turns into one message (every route but the upload), this filter counts the
    body and answers 413 as it crosses the cap, so the transcoder never holds more than the cap.

    The REST upload is exempt (its route says so): ingest caps the streamed body itself and
    answers RESOURCE_EXHAUSTED / UPLOAD_TOO_LARGE before it stores anything, and Lua turns that
    answer into the same 413 (see _lua_source). A cut made here would reach ingest as a reset
    stream, which grpc.aio hands a servicer as a normal end of stream: the upload could then be
    stored, truncated, as if complete. Envoy never buffers an upload: the transcoder forwards it
    message by message under flow control.
    """
    return {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.body_size_limit.v3.BodySizeLimit",
        "max_request_bytes": config.max_body_bytes,
    }


def _lua_source(config: GatewayConfig) -> str:
    """Before anything else: drop client-sent internal headers, and refuse a body over the cap by
    its Content-Length before reading it, then check a JSON body's field names.

    The field check (``lua/json_fields.lua``): the transcoder drops a JSON key it does not know
    (proto3 JSON parsing) and has no option to refuse one, so a misspelt field (`corpus` for
    `corpus_id`) would be ignored without a word. It walks the body once, skipping strings with
    string.find, and answers 400 naming the first unknown field (or a null, which proto3 JSON
    reads as "absent"). A body it cannot read as JSON is left to the transcoder, which refuses it.

    On the way back (``lua/entry_points.lua``), as the last filter to see the response: ingest's
    answer to a streamed upload that crossed the cap (see _body_limit), which the transcoder made
    a 429 JSON status, becomes the same 413 a sized upload gets. It is recognised by status 429
    and the ErrorInfo reason UPLOAD_TOO_LARGE, so a rate limit's 429 stays one; only a small JSON
    429 is ever read.
    """
    fields = _lua_file("json_fields.lua", SCHEMAS=_body_schemas_lua())
    entry_points = _lua_file(
        "entry_points.lua",
        TENANT_HEADER=TENANT_HEADER,
        UNROUTED_HEADER=UNROUTED_HEADER,
        ORIGINAL_PATH_HEADER=ORIGINAL_HEADERS[0],
        ORIGINAL_METHOD_HEADER=ORIGINAL_HEADERS[1],
        LOG_NAMESPACE=LOG_NAMESPACE,
        MAX_BODY_BYTES=config.max_body_bytes,
        TOO_LARGE_MESSAGE=too_large_message(config.max_body_bytes),
        MAX_ERROR_BODY_BYTES=MAX_ERROR_BODY_BYTES,
        UPLOAD_TOO_LARGE=UPLOAD_TOO_LARGE,
        TOO_LARGE_JSON=too_large_json(config.max_body_bytes),
    )
    return "".join("\n" + chunk for chunk in (fields, entry_points))  # each chunk after a blank line


def _lua_file(name: str, **values: object) -> str:
    """A Lua file of this package with each ``@NAME@`` filled in: every one given, none left over."""
    text = (resources.files("knowledge_gateway") / "lua" / name).read_text()
    wanted = set(_LUA_PLACEHOLDER.findall(text))
    if wanted != set(values):
        raise ValueError(f"lua/{name}: placeholders {sorted(wanted)}, values for {sorted(values)}")
    return _LUA_PLACEHOLDER.sub(lambda match: str(values[match.group(1)]), text)


def _json_body_routes() -> list[tuple[str, str, Descriptor]]:
    """(method, Lua pattern of the path, request message) of every REST call with a JSON body."""
    routes = []
    for method, verb, template in http_rules():
        if method.GetOptions().Extensions[annotations_pb2.http].body != "*":
            continue
        pattern = "".join(
            "[^/]+" if part.startswith("{") else re.sub(r"(\W)", r"%\1", part)
            for part in re.split(r"(\{[^}]+\})", template)
        )
        routes.append((verb.upper(), f"^{pattern}$", method.input_type))
    return routes


def _body_schemas_lua() -> str:
    """The fields each request message takes, as Lua tables: ``true`` for a value whose inside is
    not checked (a scalar, an enum, a map, a well-known type), another message's table for a
    message. Both spellings the transcoder accepts (proto name and lowerCamel JSON name)."""
    messages: dict[str, Descriptor] = {}

    def visit(message: Descriptor) -> None:
        if message.full_name in messages or message.full_name.startswith("google."):
            return
        messages[message.full_name] = message
        for member in message.fields:
            if member.message_type is not None and not member.message_type.GetOptions().map_entry:
                visit(member.message_type)

    for _, _, message in _json_body_routes():
        visit(message)
    lines = [f"schemas[{json.dumps(name)}] = {{}}" for name in sorted(messages)]
    for name in sorted(messages):
        for member in messages[name].fields:
            nested = member.message_type
            value = (
                f"schemas[{json.dumps(nested.full_name)}]"
                if nested is not None and nested.full_name in messages
                else "true"
            )
            for spelling in sorted({member.name, member.json_name}):
                lines.append(f"schemas[{json.dumps(name)}][{json.dumps(spelling)}] = {value}")
    for verb, pattern, message in _json_body_routes():
        lines.append(
            f"json_routes[#json_routes + 1] = {{{json.dumps(verb)}, {json.dumps(pattern)}, "
            f"schemas[{json.dumps(message.full_name)}]}}"
        )
    return "\n".join(lines)


def _rate_limit(config: GatewayConfig) -> dict:
    """One token bucket per tenant (a wildcard descriptor); requests without a tenant never reach
    an RPC (jwt_authn answers 401 first) and share a bucket that never runs dry."""
    everyone = {"runtime_key": "knowledge.rate_limit", "default_value": {"numerator": 100, "denominator": "HUNDRED"}}
    return {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit",
        "stat_prefix": "tenant_rate_limit",
        "token_bucket": {"max_tokens": 1_000_000, "tokens_per_fill": 1_000_000, "fill_interval": "1s"},
        "filter_enabled": everyone,
        "filter_enforced": everyone,
        "always_consume_default_token_bucket": False,
        "max_dynamic_descriptors": MAX_DYNAMIC_DESCRIPTORS,
        "rate_limits": [{"actions": [{"request_headers": {"header_name": TENANT_HEADER, "descriptor_key": "tenant"}}]}],
        "descriptors": [
            {
                "entries": [{"key": "tenant", "value": ""}],  # empty value: a bucket per distinct tenant
                "token_bucket": {
                    "max_tokens": config.rate_limit_burst,
                    "tokens_per_fill": config.rate_limit_rps,
                    "fill_interval": "1s",
                },
            }
        ],
        "response_headers_to_add": [
            {"header": {"key": "retry-after", "value": "1"}, "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}
        ],
        "enable_x_ratelimit_headers": "DRAFT_VERSION_03",
        # A gRPC caller through the gateway gets RESOURCE_EXHAUSTED (with retry-after in its
        # metadata), not UNAVAILABLE, which gRPC clients retry at once.
        "rate_limited_as_resource_exhausted": True,
    }


def _http_filters(config: GatewayConfig) -> list[dict]:
    jwt_rule = {"requires": {"provider_name": JWT_PROVIDER}}
    return [
        {
            "name": "envoy.filters.http.health_check",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.health_check.v3.HealthCheck",
                "pass_through_mode": False,
                "headers": [{"name": ":path", "string_match": {"exact": HEALTHZ_PATH}}],
                "cluster_min_healthy_percentages": {
                    _cluster_name(entry): {"value": 100.0} for entry in public_services()
                },
            },
        },
        {
            "name": "envoy.filters.http.lua",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua",
                "default_source_code": {"inline_string": _lua_source(config)},
            },
        },
        # Before the transcoder, which would otherwise hold a chunked JSON body of any size.
        {"name": BODY_LIMIT_FILTER, "typed_config": _body_limit(config)},
        {
            "name": "envoy.filters.http.cors",
            "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors"},
        },
        {
            "name": "envoy.filters.http.jwt_authn",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication",
                "providers": {
                    JWT_PROVIDER: {
                        "issuer": config.issuer,
                        "audiences": [config.audience],
                        "local_jwks": {"filename": str(config.jwks_path)},
                        "forward": True,
                        # The Authorization header only: not jwt_authn's default `access_token`
                        # query parameter (a URL is logged, cached and shared; a header is not).
                        "from_headers": [{"name": "Authorization", "value_prefix": "Bearer "}],
                        "clock_skew_seconds": 30,
                        "claim_to_headers": [{"header_name": TENANT_HEADER, "claim_name": "tenant"}],
                    }
                },
                "rules": [
                    {"match": {"path": OPENAPI_PATH}},  # the API's description needs no token
                    {"match": {"prefix": f"{REST_PREFIX}/"}, **jwt_rule},
                    {"match": {"prefix": "/knowledge.v1."}, **jwt_rule},
                ],
                "bypass_cors_preflight": True,
            },
        },
        {
            "name": "envoy.filters.http.grpc_json_transcoder",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.grpc_json_transcoder.v3.GrpcJsonTranscoder",
                "proto_descriptor": str(config.descriptor_path),
                "services": public_service_names(),
                "convert_grpc_status": True,
                "print_options": {
                    "add_whitespace": False,
                    "always_print_primitive_fields": True,
                    "always_print_enums_as_ints": False,
                    "preserve_proto_field_names": True,
                    # A server stream (WatchEvents) is one JSON object per line, each sent as it
                    # comes, instead of one JSON array that only closes when the stream ends.
                    "stream_newline_delimited": True,
                },
                "request_validation_options": {"reject_unknown_query_parameters": True},
                "max_request_body_size": config.max_body_bytes,
            },
        },
        # After the transcoder: the route is then the RPC's, whose virtual host has the tenant action
        # (a direct-response route, like the one unknown REST paths match, carries no rate limits).
        {"name": "envoy.filters.http.local_ratelimit", "typed_config": _rate_limit(config)},
        {
            "name": "envoy.filters.http.router",
            "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"},
        },
    ]


def render(config: GatewayConfig) -> dict:
    """Envoy's bootstrap as a dict (write it as JSON)."""
    manager = {
        "@type": _HCM,
        "stat_prefix": "rest",
        "codec_type": "AUTO",
        "generate_request_id": True,
        "access_log": [_access_log()],
        "local_reply_config": _local_reply_config(config),
        # Any method token reaches routing, so an unknown one is 405 (with Allow), not a bare 400.
        "http_protocol_options": {"allow_custom_methods": True},
        # Explicit, so that the gateway and the services agree (see MAX_REQUEST_HEADERS_KB).
        "max_request_headers_kb": MAX_REQUEST_HEADERS_KB,
        "common_http_protocol_options": {
            "idle_timeout": f"{config.idle_timeout_s}s",
            "max_headers_count": MAX_REQUEST_HEADERS,
            "max_requests_per_connection": config.max_requests_per_connection,
        },
        "http2_protocol_options": {"max_concurrent_streams": config.max_concurrent_streams},
        "request_headers_timeout": f"{config.request_headers_timeout_s}s",
        "request_timeout": f"{config.request_body_timeout_s or config.upload_timeout_s}s",
        "stream_idle_timeout": f"{config.stream_idle_timeout_s}s",
        "route_config": {
            "name": "knowledge",
            "virtual_hosts": [_virtual_host(config)],
            "max_direct_response_body_size_bytes": 1024 * 1024,  # the OpenAPI description
        },
        "http_filters": _http_filters(config),
    }
    return {
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": config.admin_port}}},
        # Connections beyond this are closed as they arrive: slow clients cannot take every socket.
        "overload_manager": {
            "resource_monitors": [
                {
                    "name": "envoy.resource_monitors.global_downstream_max_connections",
                    "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.resource_monitors.downstream_connections.v3."
                        "DownstreamConnectionsConfig",
                        "max_active_downstream_connections": config.max_connections,
                    },
                }
            ]
        },
        "static_resources": {
            "listeners": [
                {
                    "name": "rest",
                    "address": {"socket_address": {"address": config.listen_host, "port_value": config.listen_port}},
                    "filter_chains": [
                        {
                            "filters": [
                                {"name": "envoy.filters.network.http_connection_manager", "typed_config": manager}
                            ]
                        }
                    ],
                }
            ],
            "clusters": [_cluster(entry, config.upstreams[entry.name]) for entry in public_services()],
        },
    }


def config_text(config: GatewayConfig) -> str:
    """Envoy's bootstrap as the file it reads."""
    return json.dumps(render(config), indent=2) + "\n"


def write_config(config: GatewayConfig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(config_text(config))
    return path
