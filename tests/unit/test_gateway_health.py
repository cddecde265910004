"""The gateway's /healthz is its upstreams' readiness, through the real Envoy: 503 while ingest or
search reports its named gRPC health service NOT_SERVING, 200 again once both are SERVING; /livez
(liveness) stays 200 throughout."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from knowledge_gateway.config import GatewayConfig
from knowledge_gateway.descriptors import write_descriptor_set
from knowledge_gateway.envoy import render, write_config
from knowledge_runtime.registry import serving

from tests.support.net import free_port

ENVOY = Path(sys.executable).parent / "envoy"
INGEST, SEARCH = "knowledge.v1.CorpusService", "knowledge.v1.SearchService"
DOCUMENTS_AI = "knowledge.v1.DocumentsAIService"
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def config(tmp_path: Path, upstreams: dict[str, str], keys_dir: Path, port: int = 1) -> GatewayConfig:
    return GatewayConfig(
        listen_host="127.0.0.1",
        listen_port=port,
        admin_port=0,
        upstreams=upstreams,
        jwks_path=keys_dir / "jwks.json",
        issuer="knowledge-dev",
        audience="knowledge",
        descriptor_path=write_descriptor_set(tmp_path / "knowledge.pb"),
    )


def test_each_upstream_is_health_checked_on_its_named_service_and_healthz_needs_all(tmp_path, keys_dir):
    upstreams = {"ingest": "127.0.0.1:1", "search": "search:2", "documents-ai": "ai:3"}
    rendered = render(config(tmp_path, upstreams, keys_dir))
    checks = {
        c["name"]: c["health_checks"][0]["grpc_health_check"]["service_name"]
        for c in rendered["static_resources"]["clusters"]
    }
    assert checks == {"ingest": INGEST, "search": SEARCH, "documents-ai": DOCUMENTS_AI}
    manager = rendered["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    first = manager["http_filters"][0]  # before JWT: probes carry no token
    assert first["name"] == "envoy.filters.http.health_check"
    assert set(first["typed_config"]["cluster_min_healthy_percentages"]) == {
        "ingest",
        "search",
        "documents-ai",
    }


async def status_of(client: httpx.AsyncClient, path: str) -> int:
    try:
        return (await client.get(path)).status_code
    except httpx.TransportError:
        return 0


async def eventually_status(client: httpx.AsyncClient, path: str, wanted: int, envoy, timeout: float = 30) -> float:
    started = time.monotonic()
    while (status := await status_of(client, path)) != wanted:
        assert envoy.poll() is None, envoy.stderr.read().decode()
        assert time.monotonic() - started < timeout, f"{path} stayed {status}, wanted {wanted}"
        await asyncio.sleep(0.1)
    return time.monotonic() - started


async def test_healthz_follows_the_upstreams_readiness_and_livez_does_not(tmp_path, keys_dir):
    servers, healths, upstreams = [], {}, {}
    for name in (INGEST, SEARCH, DOCUMENTS_AI):
        server = grpc.aio.server()
        healths[name] = HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(healths[name], server)
        upstreams[serving(name).name] = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
        await server.start()
        await healths[name].set("", SERVING)
        await healths[name].set(name, SERVING)
        servers.append(server)
    port = free_port()
    path = write_config(config(tmp_path, upstreams, keys_dir, port), tmp_path / "envoy.json")
    envoy = subprocess.Popen(
        [str(ENVOY), "-c", str(path), "--log-level", "error", "--base-id", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:
            await eventually_status(client, "/healthz", 200, envoy, timeout=60)
            await healths[SEARCH].set(SEARCH, NOT_SERVING)  # its database went away, say
            assert await eventually_status(client, "/healthz", 503, envoy) < 5
            assert await status_of(client, "/livez") == 200
            await healths[SEARCH].set(SEARCH, SERVING)
            assert await eventually_status(client, "/healthz", 200, envoy) < 5
            await healths[INGEST].set(INGEST, NOT_SERVING)
            assert await eventually_status(client, "/healthz", 503, envoy) < 5
            assert await status_of(client, "/livez") == 200
    finally:
        envoy.terminate()
        envoy.wait(30)
        for server in servers:
            await server.stop(None)
