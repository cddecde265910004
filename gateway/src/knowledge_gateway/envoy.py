"""Render Envoy's bootstrap for the REST API.

REST ``/api/v1/knowledge/*`` is transcoded to gRPC by ``grpc_json_transcoder`` from the
descriptor set (paths from the ``google.api.http`` annotations, proto field names kept,
gRPC statuses converted to HTTP + JSON). ``jwt_authn`` verifies the bearer token against a
local JWKS (issuer, audience, expiry) and forwards it, so the services verify it again and
read the tenant and capabilities from it.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass
from pathlib import Path

from knowledge_gateway.descriptors import descriptor_set, public_service_names

REST_PREFIX = "/api/v1/knowledge"
JWT_PROVIDER = "knowledge"
_HCM = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"


@dataclass(frozen=True)
class GatewayConfig:
    listen_host: str
    listen_port: int
    admin_port: int
    upstreams: dict[str, str]  # full service name -> host:port
    jwks_path: Path
    issuer: str
    audience: str
    descriptor_path: Path
    max_body_bytes: int = 100 * 1024 * 1024
    request_timeout_s: int = 30
    upload_timeout_s: int = 600


def write_descriptor_set(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(descriptor_set().SerializeToString())
    return path


def _cluster_name(service: str) -> str:
    return service.rsplit(".", 1)[-1].lower()


def _cluster(service: str, address: str) -> dict:
    host, _, port = address.rpartition(":")
    try:
        ipaddress.ip_address(host)
        discovery = "STATIC"
    except ValueError:
        discovery = "STRICT_DNS"  # a Kubernetes Service name
    return {
        "name": _cluster_name(service),
        "type": discovery,
        "connect_timeout": "2s",
        "typed_extension_protocol_options": {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                "explicit_http_config": {"http2_protocol_options": {}},
            }
        },
        "load_assignment": {
            "cluster_name": _cluster_name(service),
            "endpoints": [
                {"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": host, "port_value": int(port)}}}}]}
            ],
        },
    }


def _routes(config: GatewayConfig) -> list[dict]:
    routes: list[dict] = [
        {"match": {"path": "/healthz"}, "direct_response": {"status": 200, "body": {"inline_string": "ok\n"}}},
        # After transcoding the path is the gRPC method's; uploads get the long timeout.
        {
            "match": {"path": "/knowledge.v1.IngestService/UploadDocument"},
            "route": {"cluster": _cluster_name("knowledge.v1.IngestService"), "timeout": f"{config.upload_timeout_s}s"},
        },
    ]
    for service in public_service_names():
        routes.append(
            {
                "match": {"prefix": f"/{service}/"},
                "route": {"cluster": _cluster_name(service), "timeout": f"{config.request_timeout_s}s"},
            }
        )
    return routes


def _access_log() -> dict:
    fields = {
        "time": "%START_TIME%",
        "method": "%REQ(:METHOD)%",
        "path": "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%",
        "grpc_method": "%REQ(:PATH)%",
        "status": "%RESPONSE_CODE%",
        "grpc_status": "%GRPC_STATUS%",
        "flags": "%RESPONSE_FLAGS%",
        "bytes_in": "%BYTES_RECEIVED%",
        "bytes_out": "%BYTES_SENT%",
        "duration_ms": "%DURATION%",
        "request_id": "%REQ(X-REQUEST-ID)%",
        "traceparent": "%REQ(TRACEPARENT)%",
    }
    return {
        "name": "envoy.access_loggers.stdout",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog",
            "log_format": {"json_format": fields},
        },
    }


def _http_filters(config: GatewayConfig) -> list[dict]:
    jwt_rule = {"requires": {"provider_name": JWT_PROVIDER}}
    return [
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
                        "clock_skew_seconds": 30,
                    }
                },
                "rules": [
                    {"match": {"prefix": f"{REST_PREFIX}/"}, **jwt_rule},
                    {"match": {"prefix": "/knowledge.v1."}, **jwt_rule},
                ],
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
                },
                "request_validation_options": {"reject_unknown_query_parameters": True},
                "max_request_body_size": config.max_body_bytes,
            },
        },
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
        "route_config": {
            "name": "knowledge",
            "virtual_hosts": [{"name": "knowledge", "domains": ["*"], "routes": _routes(config)}],
        },
        "http_filters": _http_filters(config),
    }
    return {
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": config.admin_port}}},
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
            "clusters": [_cluster(service, config.upstreams[service]) for service in public_service_names()],
        },
    }


def write_config(config: GatewayConfig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(render(config), indent=2))
    return path
