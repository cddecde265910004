"""The generated Envoy configuration is accepted by the real Envoy binary."""

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

from google.protobuf import descriptor_pb2
from knowledge_gateway.config import GatewayConfig
from knowledge_gateway.descriptors import descriptor_set, public_service_names, write_descriptor_set
from knowledge_gateway.envoy import render, write_config

ENVOY = Path(sys.executable).parent / "envoy"


def config(tmp_path: Path, jwks: Path) -> GatewayConfig:
    return GatewayConfig(
        listen_host="127.0.0.1",
        listen_port=18080,
        admin_port=0,
        upstreams={"ingest": "127.0.0.1:1", "search": "search:50054", "documents-ai": "127.0.0.1:3"},
        jwks_path=jwks,
        issuer="knowledge-dev",
        audience="knowledge",
        descriptor_path=write_descriptor_set(tmp_path / "knowledge.pb"),
    )


def test_descriptor_set_is_self_contained():
    files = descriptor_set().file
    names = [f.name for f in files]
    for index, file in enumerate(files):  # every dependency precedes its dependant
        assert all(dep in names[:index] for dep in file.dependency), file.name
    assert {"knowledge/v1/ingest.proto", "google/api/http.proto", "google/rpc/error_details.proto"} <= set(names)
    assert public_service_names() == [
        "knowledge.v1.CorpusService",
        "knowledge.v1.DocumentService",
        "knowledge.v1.IngestJobService",
        "knowledge.v1.ImportService",
        "knowledge.v1.TenantService",
        "knowledge.v1.EventService",
        "knowledge.v1.PassageService",
        "knowledge.v1.WebhookService",
        "knowledge.v1.ModelChangeService",
        "knowledge.v1.SearchService",
        "knowledge.v1.DocumentsAIService",
    ]
    assert isinstance(files[0], descriptor_pb2.FileDescriptorProto)


def test_render_keeps_proto_names_and_converts_status(tmp_path, keys_dir):
    rendered = render(config(tmp_path, keys_dir / "jwks.json"))
    text = json.dumps(rendered)
    assert '"preserve_proto_field_names": true' in text
    assert '"convert_grpc_status": true' in text
    clusters = {c["name"]: c["type"] for c in rendered["static_resources"]["clusters"]}
    assert clusters == {"ingest": "STATIC", "search": "STRICT_DNS", "documents-ai": "STATIC"}


def test_envoy_validates_the_config(tmp_path, keys_dir):
    path = write_config(config(tmp_path, keys_dir / "jwks.json"), tmp_path / "envoy.json")
    result = subprocess.run(
        [str(ENVOY), "--mode", "validate", "-c", str(path), "--log-level", "error"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_mcp_path_is_routed_behind_the_token_to_an_http_cluster_envoy_accepts(tmp_path, keys_dir):
    """/mcp goes to the MCP adapter's cluster (HTTP/1.1, checked on /readyz), only with a verified
    token; the adapter's readiness does not hold up /healthz; without its address it is not routed."""
    base = config(tmp_path, keys_dir / "jwks.json")
    with_mcp = dataclasses.replace(base, upstreams={**base.upstreams, "mcp": "127.0.0.1:4"})
    rendered = render(with_mcp)
    clusters = {c["name"]: c for c in rendered["static_resources"]["clusters"]}
    mcp = clusters["mcp"]
    assert mcp["health_checks"][0]["http_health_check"] == {"path": "/readyz"}
    assert "typed_extension_protocol_options" not in mcp and "typed_extension_protocol_options" in clusters["ingest"]
    manager = rendered["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    routes = manager["route_config"]["virtual_hosts"][0]["routes"]
    (route,) = [r for r in routes if r["match"].get("path") == "/mcp"]
    assert route["route"]["cluster"] == "mcp" and route["route"]["timeout"] == f"{with_mcp.http_route_timeout_s}s"
    filters = {f["name"]: f["typed_config"] for f in manager["http_filters"]}
    rules = filters["envoy.filters.http.jwt_authn"]["rules"]
    assert {"match": {"path": "/mcp"}, "requires": {"provider_name": "knowledge"}} in rules
    assert "mcp" not in filters["envoy.filters.http.health_check"]["cluster_min_healthy_percentages"]
    path = write_config(with_mcp, tmp_path / "envoy.json")
    result = subprocess.run(
        [str(ENVOY), "--mode", "validate", "-c", str(path), "--log-level", "error"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    plain = render(base)  # no address: no cluster, no route
    assert "mcp" not in {c["name"] for c in plain["static_resources"]["clusters"]}
    plain_manager = plain["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    assert not [
        r for r in plain_manager["route_config"]["virtual_hosts"][0]["routes"] if r["match"].get("path") == "/mcp"
    ]
