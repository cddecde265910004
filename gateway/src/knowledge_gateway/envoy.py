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
every gRPC upstream reports its named gRPC health service SERVING, checked by Envoy every
``HEALTH_CHECK_INTERVAL_S`` (readiness: a service whose database is down is NOT_SERVING), else 503.
The MCP adapter (``/mcp``) is health-checked on its own readiness path but left out of
``/healthz``: the REST API stays ready without it.

This module assembles the bootstrap; its parts: ``config`` (``GatewayConfig`` and the names the
parts share), ``routes`` (clusters and routes), ``filters`` (the HTTP filter chain), ``lua``
(the Lua filter's source from ``lua/*.lua``) and ``local_replies`` (Envoy's own answers as JSON).
"""

from __future__ import annotations

import json
from pathlib import Path

from knowledge_gateway.config import (
    LOG_NAMESPACE,
    MAX_REQUEST_HEADERS,
    MAX_REQUEST_HEADERS_KB,
    TENANT_HEADER,
    GatewayConfig,
)
from knowledge_gateway.filters import http_filters
from knowledge_gateway.local_replies import local_reply_config
from knowledge_gateway.routes import clusters, virtual_host

_HCM = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"


def render(config: GatewayConfig) -> dict:
    """Envoy's bootstrap as a dict (write it as JSON)."""
    manager = {
        "@type": _HCM,
        "stat_prefix": "rest",
        "codec_type": "AUTO",
        # One x-request-id per request, end to end: the client's when it sends one (so it can find
        # its request in the logs), else Envoy's; forwarded to the service, which passes it on to
        # every service it calls and logs it, and answered back in the response headers.
        "generate_request_id": True,
        "preserve_external_request_id": True,
        "always_set_request_id_in_response": True,
        "access_log": [_access_log()],
        "local_reply_config": local_reply_config(config),
        # Any method token reaches routing, so an unknown one is 405 (with Allow), not a bare 400.
        "http_protocol_options": {"allow_custom_methods": True},
        # Explicit, so that the gateway and the services agree (see config.MAX_REQUEST_HEADERS_KB).
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
            "virtual_hosts": [virtual_host(config)],
            "max_direct_response_body_size_bytes": 1024 * 1024,  # the OpenAPI description
        },
        "http_filters": http_filters(config),
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
            "clusters": clusters(config),
        },
    }


def config_text(config: GatewayConfig) -> str:
    """Envoy's bootstrap as the file it reads."""
    return json.dumps(render(config), indent=2) + "\n"


def write_config(config: GatewayConfig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(config_text(config))
    return path


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
