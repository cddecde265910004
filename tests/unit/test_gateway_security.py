"""The gateway's security settings as rendered for Envoy: CORS, per-tenant rate limit, body cap
(from the Content-Length, or counted as a chunked body streams), JSON local replies, what the access log may carry, and the OpenAPI route without a token."""

import json
from pathlib import Path

import pytest
from knowledge_gateway.config import (
    BODY_LIMIT_FILTER,
    OPENAPI_PATH,
    TENANT_HEADER,
    GatewayConfig,
    limits_from_env,
    parse_origins,
)
from knowledge_gateway.envoy import render
from knowledge_gateway.local_replies import too_large_json
from knowledge_gateway.render import gateway_config
from knowledge_runtime.settings import Env, SettingsError


def rendered(**overrides) -> dict:
    config = GatewayConfig(
        listen_host="127.0.0.1",
        listen_port=8080,
        admin_port=0,
        upstreams={"ingest": "127.0.0.1:1", "search": "127.0.0.1:2", "documents-ai": "127.0.0.1:3"},
        jwks_path=Path("/keys/jwks.json"),
        issuer="iss",
        audience="aud",
        descriptor_path=Path("/d.pb"),
        **overrides,
    )
    return render(config)


def manager(bootstrap: dict) -> dict:
    return bootstrap["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]


def filters(bootstrap: dict) -> dict[str, dict]:
    return {f["name"]: f["typed_config"] for f in manager(bootstrap)["http_filters"]}


def test_cors_only_for_configured_origins():
    assert "typed_per_filter_config" not in manager(rendered())["route_config"]["virtual_hosts"][0]
    host = manager(rendered(cors_origins=("https://app.example.com",)))["route_config"]["virtual_hosts"][0]
    policy = host["typed_per_filter_config"]["envoy.filters.http.cors"]
    assert policy["allow_origin_string_match"] == [{"exact": "https://app.example.com"}]
    assert "authorization" in policy["allow_headers"] and "retry-after" in policy["expose_headers"]
    assert filters(rendered())["envoy.filters.http.jwt_authn"]["bypass_cors_preflight"] is True


def test_origins_are_parsed_and_validated():
    assert parse_origins(None) == ()
    assert parse_origins(" https://a.example.com/, http://localhost:5173 ") == (
        "https://a.example.com",
        "http://localhost:5173",
    )
    for bad in ("*", "a.example.com", "https://a.example.com/path", "ftp://x"):
        with pytest.raises(SettingsError, match="KNOWLEDGE_CORS_ORIGINS"):
            parse_origins(bad)
    limits = limits_from_env(Env({"KNOWLEDGE_CORS_ORIGINS": "https://a.example.com", "KNOWLEDGE_RATE_LIMIT_RPS": "7"}))
    assert limits == {"cors_origins": ("https://a.example.com",), "rate_limit_rps": 7, "rate_limit_burst": 200}
    assert gateway_config({"KNOWLEDGE_RATE_LIMIT_BURST": "9"}).rate_limit_burst == 9  # the Kubernetes render too


def test_rate_limit_is_a_bucket_per_verified_tenant():
    bootstrap = rendered(rate_limit_rps=5, rate_limit_burst=10)
    jwt = filters(bootstrap)["envoy.filters.http.jwt_authn"]["providers"]["knowledge"]
    assert jwt["claim_to_headers"] == [{"header_name": TENANT_HEADER, "claim_name": "tenant"}]
    limit = filters(bootstrap)["envoy.filters.http.local_ratelimit"]
    [descriptor] = limit["descriptors"]
    assert descriptor["entries"] == [{"key": "tenant", "value": ""}]  # wildcard: one bucket per value
    assert descriptor["token_bucket"] == {"max_tokens": 10, "tokens_per_fill": 5, "fill_interval": "1s"}
    assert limit["always_consume_default_token_bucket"] is False
    assert {"key": "retry-after", "value": "1"} in [h["header"] for h in limit["response_headers_to_add"]]
    assert limit["rate_limits"][0]["actions"][0]["request_headers"]["header_name"] == TENANT_HEADER
    # A client cannot pick someone else's bucket: the header is removed before jwt_authn sets it.
    names = [f["name"] for f in manager(bootstrap)["http_filters"]]
    assert names.index("envoy.filters.http.lua") < names.index("envoy.filters.http.jwt_authn")
    lua = filters(bootstrap)["envoy.filters.http.lua"]["default_source_code"]["inline_string"]
    assert f'headers:remove("{TENANT_HEADER}")' in lua


def test_body_cap_from_content_length_before_the_body_is_read():
    bootstrap = rendered(max_body_bytes=1234)
    lua = filters(bootstrap)["envoy.filters.http.lua"]["default_source_code"]["inline_string"]
    assert "size > 1234" in lua and '"413"' in lua
    assert "411" not in json.dumps(bootstrap)  # a body without a Content-Length is capped as it streams
    assert filters(bootstrap)["envoy.filters.http.grpc_json_transcoder"]["max_request_body_size"] == 1234


def test_a_chunked_body_is_counted_before_the_transcoder_except_a_streamed_call():
    bootstrap = rendered(max_body_bytes=1234)
    names = [f["name"] for f in manager(bootstrap)["http_filters"]]
    assert (
        names.index("envoy.filters.http.lua")
        < names.index(BODY_LIMIT_FILTER)
        < names.index("envoy.filters.http.grpc_json_transcoder")
    )
    assert filters(bootstrap)[BODY_LIMIT_FILTER]["max_request_bytes"] == 1234
    routes = manager(bootstrap)["route_config"]["virtual_hosts"][0]["routes"]

    def counted(method: str, path: str) -> bool:
        """Whether the first route this request matches leaves the body limit on."""
        import re

        for route in routes:
            match = route["match"]
            if "path" in match and match["path"] != path.split("?")[0]:
                continue
            if "prefix" in match and not path.startswith(match["prefix"]):
                continue
            if "safe_regex" in match and not re.fullmatch(match["safe_regex"]["regex"], path.split("?")[0]):
                continue
            header = (match.get("headers") or [{}])[0]
            if header:
                expected = header["string_match"].get("exact") or header["string_match"]["safe_regex"]["regex"]
                if bool(re.fullmatch(expected, method)) == bool(header.get("invert_match")):
                    continue
            config = route.get("typed_per_filter_config", {}).get(BODY_LIMIT_FILTER, {})
            return not config.get("disabled", False)
        raise AssertionError(f"no route for {method} {path}")

    # REST JSON calls are counted; the upload is capped by ingest while it streams (a cut here
    # would reach ingest as a reset stream that grpc.aio reports as a normal end).
    assert counted("POST", "/api/v1/knowledge/search")
    assert counted("POST", "/api/v1/knowledge/corpora")
    assert not counted("POST", "/api/v1/knowledge/upload?corpus_id=1&filename=a.txt")
    assert not counted("POST", "/api/v1/knowledge/upload/")
    assert counted("OPTIONS", "/api/v1/knowledge/upload")  # a preflight has no body; the catch-all
    # gRPC clients through the gateway: their messages are capped by the services.
    assert not counted("POST", "/knowledge.v1.IngestJobService/UploadDocument")
    assert not counted("POST", "/knowledge.v1.SearchService/Search")


def test_ingest_refusing_a_streamed_upload_becomes_the_same_413():
    bootstrap = rendered(max_body_bytes=1234)
    lua = filters(bootstrap)["envoy.filters.http.lua"]["default_source_code"]["inline_string"]
    assert "envoy_on_response" in lua and '"429"' in lua and "UPLOAD_TOO_LARGE" in lua
    assert too_large_json(1234) in lua
    mappers = manager(bootstrap)["local_reply_config"]["mappers"]
    [too_large] = [
        m
        for m in mappers
        if m["filter"].get("status_code_filter", {}).get("comparison", {}).get("value", {}).get("default_value") == 413
    ]
    # Every 413, whichever filter answered, is the body Lua writes for ingest's refusal.
    assert too_large["body_format_override"]["json_format"] == json.loads(too_large_json(1234))
    assert json.loads(too_large_json(1234))["details"][0]["reason"] == "UPLOAD_TOO_LARGE"


def test_local_replies_are_json_status_and_jwt_rejections_are_401():
    mappers = manager(rendered())["local_reply_config"]["mappers"]
    rest = [m for m in mappers if "json_format" in m["body_format_override"]]
    by_reason = {m["body_format_override"]["json_format"]["details"][0]["reason"]: m for m in rest}
    for reason in ("TOKEN_MISSING", "TOKEN_EXPIRED", "TOKEN_INVALID"):  # a 403 from jwt_authn too
        assert by_reason[reason]["status_code"] == 401
        assert by_reason[reason]["body_format_override"]["json_format"]["code"] == 16
    assert by_reason["RATE_LIMITED"]["body_format_override"]["json_format"]["code"] == 8
    statuses = {
        m["filter"]["status_code_filter"]["comparison"]["value"]["default_value"]
        for m in rest
        if "status_code_filter" in m["filter"]
    }
    assert {400, 404, 413, 429, 431, 503} <= statuses and 200 not in statuses  # /healthz and the OpenAPI keep theirs


def test_access_log_never_carries_credentials():
    log = manager(rendered())["access_log"][0]["typed_config"]["log_format"]["json_format"]
    text = json.dumps(log).lower()
    assert "authorization" not in text and "cookie" not in text
    assert log["tenant"] == f"%REQ({TENANT_HEADER.upper()})%"


def test_openapi_is_served_without_a_token():
    bootstrap = rendered()
    rules = filters(bootstrap)["envoy.filters.http.jwt_authn"]["rules"]
    assert rules[0] == {"match": {"path": OPENAPI_PATH}}  # first match wins: no `requires`
    routes = manager(bootstrap)["route_config"]["virtual_hosts"][0]["routes"]
    served = next(r for r in routes if r["match"].get("path") == OPENAPI_PATH)
    assert json.loads(Path(served["direct_response"]["body"]["filename"]).read_text())["openapi"].startswith("3.")


def test_a_rest_path_with_a_method_it_lacks_is_405_with_allow():
    import re

    routes = manager(rendered())["route_config"]["virtual_hosts"][0]["routes"]
    refusing = [r for r in routes if r.get("direct_response", {}).get("status") == 405]

    def refused(method: str, path: str) -> str | None:
        for route in refusing:
            header = route["match"]["headers"][0]
            if re.fullmatch(route["match"]["safe_regex"]["regex"], path) and not re.fullmatch(
                header["string_match"]["safe_regex"]["regex"], method
            ):
                return route["response_headers_to_add"][0]["header"]["value"]
        return None

    assert refused("PUT", "/api/v1/knowledge/corpora") == "GET, POST"
    assert refused("TRACE", "/api/v1/knowledge/documents/7/text") == "GET"
    assert refused("GET", "/api/v1/knowledge/documents/7/text") is None
    assert refused("OPTIONS", "/api/v1/knowledge/corpora") is None  # CORS preflights pass
    assert refused("POST", "/api/v1/knowledge/ingest/0b1c:cancel") is None  # not the GET job route
    assert refused("GET", "/api/v1/knowledge/ingest/0b1c:cancel") == "POST"
    assert routes[-1]["match"] == {"prefix": "/"}  # the catch-all stays last


def test_slow_clients_and_header_sizes_have_explicit_limits():
    from knowledge_gateway.config import MAX_REQUEST_HEADERS_KB

    hcm = manager(rendered(upload_timeout_s=600))
    assert hcm["request_headers_timeout"] == "10s" and hcm["request_timeout"] == "600s"
    assert hcm["stream_idle_timeout"] == "300s" and hcm["common_http_protocol_options"]["idle_timeout"] == "60s"
    assert hcm["http2_protocol_options"]["max_concurrent_streams"] == 100
    assert hcm["max_request_headers_kb"] == MAX_REQUEST_HEADERS_KB
    [monitor] = rendered()["overload_manager"]["resource_monitors"]
    assert monitor["typed_config"]["max_active_downstream_connections"] == 10_000
    jwt = filters(rendered())["envoy.filters.http.jwt_authn"]["providers"]["knowledge"]
    assert jwt["from_headers"] == [{"name": "Authorization", "value_prefix": "Bearer "}] and "from_params" not in jwt
    assert filters(rendered())["envoy.filters.http.local_ratelimit"]["rate_limited_as_resource_exhausted"] is True


def test_the_bulk_texts_call_gets_the_upload_timeout_and_keeps_the_body_limit():
    routes = manager(rendered(upload_timeout_s=600, request_timeout_s=30))["route_config"]["virtual_hosts"][0]["routes"]

    def route_of(path: str) -> dict:
        return next(
            r for r in routes if r["match"].get("path") == path or path.startswith(r["match"].get("prefix", "~"))
        )

    batch = route_of("/knowledge.v1.IngestJobService/BatchIngestTexts")
    assert batch["route"]["timeout"] == "600s"  # it writes up to 1,000 jobs before it answers
    assert BODY_LIMIT_FILTER not in batch.get("typed_per_filter_config", {})  # the JSON body is still counted
    assert route_of("/knowledge.v1.IngestJobService/IngestText")["route"]["timeout"] == "30s"
