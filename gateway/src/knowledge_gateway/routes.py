"""The upstream clusters and the routes to them.

One cluster per public service process (``knowledge_runtime.registry``), health-checked on its
readiness service (an HTTP process on its readiness path). Routes: ``/livez`` and the OpenAPI
description answered by Envoy; every gRPC full name of a public process to its cluster (a
transcoded REST call is routed again by its gRPC path), with the upload's and the batch's long
timeout and no timeout for server streams; an HTTP process's one path (``/mcp``) to its cluster; the web
console's files (``knowledge_gateway.console``); 405 with ``Allow`` for a REST path asked with a method it lacks; and a catch-all that Envoy
answers 404.
"""

from __future__ import annotations

import ipaddress
import re

from google.protobuf.descriptor import MethodDescriptor
from knowledge_runtime.registry import (
    HTTP_READINESS_PATH,
    ServiceEntry,
    public_http_services,
    public_services,
    serving,
)

from knowledge_gateway.config import (
    BODY_LIMIT_FILTER,
    HEALTH_CHECK_INTERVAL_S,
    LIVEZ_PATH,
    OPENAPI_PATH,
    UNROUTED_HEADER,
    UPLOAD_PATH,
    GatewayConfig,
)
from knowledge_gateway.console import console_routes, dev_sign_in_cluster
from knowledge_gateway.descriptors import http_rules, public_method, streamed_methods


def cluster_name(entry: ServiceEntry) -> str:
    """One cluster per upstream process, named as the registry names the process ("ingest"),
    whichever of its gRPC services a route serves."""
    return entry.name


def gateway_upstreams() -> tuple[ServiceEntry, ...]:
    """Every process the gateway may have a cluster for: the public gRPC ones, then the HTTP ones."""
    return public_services() + public_http_services()


def routed_http(config: GatewayConfig) -> tuple[ServiceEntry, ...]:
    """The HTTP processes the configuration gives an address: each gets its cluster and its path.
    One without (a gateway for the REST and gRPC API alone) is not routed: its path answers 404."""
    return tuple(entry for entry in public_http_services() if entry.name in config.upstreams)


def clusters(config: GatewayConfig) -> list[dict]:
    """One cluster per public gRPC process (each must have an address), then per routed HTTP one,
    then the development sign-in's where there is one."""
    found = [cluster(entry, config.upstreams[entry.name]) for entry in public_services() + routed_http(config)]
    return found + dev_sign_in_cluster(config)


def cluster(entry: ServiceEntry, address: str) -> dict:
    host, _, port = address.rpartition(":")
    try:
        ipaddress.ip_address(host)
        discovery = "STATIC"
    except ValueError:
        discovery = "STRICT_DNS"  # a Kubernetes Service name
    # The named health service is the upstream's readiness (see knowledge_runtime.health); an
    # HTTP process answers its readiness path. Checked at the same pace with or without traffic,
    # so /healthz is never stale.
    check = (
        {"http_health_check": {"path": HTTP_READINESS_PATH}}
        if entry.is_http
        else {"grpc_health_check": {"service_name": entry.health_name}}
    )
    found = {
        "name": cluster_name(entry),
        "type": discovery,
        "connect_timeout": "2s",
        "health_checks": [
            {
                "timeout": "1s",
                "interval": f"{HEALTH_CHECK_INTERVAL_S}s",
                "no_traffic_interval": f"{HEALTH_CHECK_INTERVAL_S}s",
                "unhealthy_threshold": 1,
                "healthy_threshold": 1,
                **check,
            }
        ],
        "load_assignment": {
            "cluster_name": cluster_name(entry),
            "endpoints": [
                {
                    "lb_endpoints": [
                        {"endpoint": {"address": {"socket_address": {"address": host, "port_value": int(port)}}}}
                    ]
                }
            ],
        },
    }
    if not entry.is_http:  # gRPC needs HTTP/2 upstream; an HTTP process speaks HTTP/1.1
        found["typed_extension_protocol_options"] = {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                "explicit_http_config": {"http2_protocol_options": {}},
            }
        }
    return found


def _grpc_path(method: MethodDescriptor) -> str:
    return f"/{method.containing_service.full_name}/{method.name}"


def _method_cluster(method: MethodDescriptor) -> str:
    return cluster_name(serving(method.containing_service.full_name))


# On a route: the body limit filter leaves its requests alone (see knowledge_gateway.filters).
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
        # /healthz is answered by the health_check filter before routing (see knowledge_gateway.filters).
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
                    "route": {"cluster": cluster_name(entry), "timeout": f"{config.request_timeout_s}s"},
                    **_WITHOUT_BODY_LIMIT,
                }
            )
    # An HTTP process's one path (the MCP adapter's Streamable HTTP endpoint): its requests are
    # JSON-RPC messages, answered as JSON, each a tool call bounded by the process's own deadlines.
    for entry in routed_http(config):
        assert entry.http_path is not None
        routes.append(
            {
                "match": {"path": entry.http_path},
                "route": {"cluster": cluster_name(entry), "timeout": f"{config.http_route_timeout_s}s"},
            }
        )
    # The web console's page and files (knowledge_gateway.console): answered by Envoy itself.
    routes.extend(console_routes(config))
    routes.extend(_method_not_allowed_routes())
    # A path the transcoder did not turn into an RPC: 404. It is a route entry, not a direct
    # response, because filters before the transcoder (CORS, jwt_authn) only apply their policies
    # on one; it names its cluster by a header that Lua removes from every request, so it never
    # reaches a cluster and Envoy answers 404 itself. Every REST path matches it before it is
    # transcoded (and routed again); the REST upload has its own copy that is not counted by the
    # body limit (see knowledge_gateway.filters).
    unrouted = {"cluster_header": UNROUTED_HEADER}
    upload = {
        "safe_regex": {"regex": re.escape(UPLOAD_PATH) + "/?"},  # the transcoder takes "upload/" too
        "headers": [{"name": ":method", "string_match": {"exact": "POST"}}],
    }
    routes.append({"match": upload, "route": unrouted, **_WITHOUT_BODY_LIMIT})
    # Lua reads a JSON body whole to check its fields (see knowledge_gateway.lua): up to the cap.
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


def path_regex(template: str) -> str:
    return "".join(
        "[^/:]+" if part.startswith("{") else re.escape(part)  # ":verb" is not an id
        for part in re.split(r"(\{[^}]+\})", template)
    )


def _method_not_allowed_routes() -> list[dict]:
    """405 with ``Allow`` for a REST path asked with a method it does not have. Its own methods and
    OPTIONS (CORS preflights) fall through to the catch-all route entry and the transcoder."""
    routes = []
    for template, methods in sorted(rest_methods().items()):
        regex = path_regex(template)
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


def virtual_host(config: GatewayConfig) -> dict:
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
                "allow_methods": "GET, POST, PATCH, DELETE, OPTIONS",
                "allow_headers": "authorization, content-type, traceparent, x-request-id",
                "expose_headers": "retry-after, x-request-id, x-ratelimit-limit, x-ratelimit-remaining, x-ratelimit-reset",
                "max_age": "600",
            }
        }
    return host
