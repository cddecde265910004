"""The HTTP filters of the gateway's listener, in the order Envoy runs them.

Readiness (``/healthz``) before anything needs a token; Lua (internal headers dropped, the body
cap from the Content-Length, JSON field names); the body limit while a body streams; CORS;
``jwt_authn``; the transcoder; the per-tenant rate limit, after the transcoder so that it sees
the RPC's route; the router.
"""

from __future__ import annotations

from knowledge_runtime.registry import public_services

from knowledge_gateway.config import (
    BODY_LIMIT_FILTER,
    HEALTHZ_PATH,
    JWT_FAILURE_KEY,
    JWT_PROVIDER,
    OPENAPI_PATH,
    REST_PREFIX,
    TENANT_HEADER,
    GatewayConfig,
)
from knowledge_gateway.descriptors import public_service_names
from knowledge_gateway.lua import lua_source
from knowledge_gateway.routes import cluster_name, routed_http

MAX_DYNAMIC_DESCRIPTORS = 10_000  # tenants with a live bucket; the least recently seen is evicted


def http_filters(config: GatewayConfig) -> list[dict]:
    jwt_rule = {"requires": {"provider_name": JWT_PROVIDER}}
    return [
        {
            "name": "envoy.filters.http.health_check",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.health_check.v3.HealthCheck",
                "pass_through_mode": False,
                "headers": [{"name": ":path", "string_match": {"exact": HEALTHZ_PATH}}],
                "cluster_min_healthy_percentages": {
                    cluster_name(entry): {"value": 100.0} for entry in public_services()
                },
            },
        },
        {
            "name": "envoy.filters.http.lua",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua",
                "default_source_code": {"inline_string": lua_source(config)},
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
                        # Why a token was refused, for the local replies to answer with the
                        # services' reason (TOKEN_MISSING, TOKEN_EXPIRED, TOKEN_INVALID).
                        "failed_status_in_metadata": JWT_FAILURE_KEY,
                    }
                },
                "rules": [
                    {"match": {"path": OPENAPI_PATH}},  # the API's description needs no token
                    {"match": {"prefix": f"{REST_PREFIX}/"}, **jwt_rule},
                    {"match": {"prefix": "/knowledge.v1."}, **jwt_rule},
                    # The HTTP processes' paths (/mcp): verified here and again by the process.
                    *({"match": {"path": entry.http_path}, **jwt_rule} for entry in routed_http(config)),
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
                # A query string's "+" is a space, as HTML forms and most clients write one: a
                # ?filter= is words and spaces (a literal "+" is %2B; ids and tokens hold none).
                "query_param_unescape_plus": True,
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


def _body_limit(config: GatewayConfig) -> dict:
    """The upload cap on a body sent without a Content-Length (chunked), counted as it streams.

    Lua refuses a body from its Content-Length before reading it; a chunked body has none, and
    Lua cannot answer once it has let the headers through to read the body. For a REST call that
    the transcoder turns into one message (every route but the upload), this filter counts the
    body and answers 413 as it crosses the cap, so the transcoder never holds more than the cap.

    The REST upload is exempt (its route says so): ingest caps the streamed body itself and
    answers RESOURCE_EXHAUSTED / UPLOAD_TOO_LARGE before it stores anything, and Lua turns that
    answer into the same 413 (see knowledge_gateway.lua). A cut made here would reach ingest as a
    reset stream, which grpc.aio hands a servicer as a normal end of stream: the upload could then
    be stored, truncated, as if complete. Envoy never buffers an upload: the transcoder forwards it
    message by message under flow control.
    """
    return {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.body_size_limit.v3.BodySizeLimit",
        "max_request_bytes": config.max_body_bytes,
    }
