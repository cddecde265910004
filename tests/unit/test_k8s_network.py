"""k8s/: who may reach whom. The namespace denies ingress by default; only the gateway is
reachable from outside; each service's port only from its callers (the MCP adapter's from the
gateway, the public services' from the gateway and the MCP adapter); PostgreSQL only from the
services that have a role and the migration; Prometheus only the metrics port; the GC pass only
content-index.
"""

from __future__ import annotations

import pytest

from tests.support.k8s import (
    DATABASE_SERVICES,
    GATEWAY,
    METRICS_PORT,
    MIGRATE,
    OUTSIDE,
    OVERLAYS,
    SERVICES,
    STRANGER,
    labels_of,
    one,
    pod,
    reachable,
    service_port,
)

CALLERS = {  # who may call each service's port
    "content-index": {"ingest"},
    "embedder": {"ingest", "search", "documents-ai", "mcp"},
    "ingest": {"gateway", "mcp"},
    "search": {"gateway", "mcp", "ingest"},  # ingest: the model change's evaluation
    "documents-ai": {"gateway", "mcp"},
    "mcp": {"gateway"},
}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_namespace_denies_ingress_by_default(overlay):
    deny = one(overlay, "NetworkPolicy", "knowledge-default-deny-ingress")
    assert deny["spec"] == {"podSelector": {}, "policyTypes": ["Ingress"]}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_the_gateway_is_reachable_from_outside(overlay):
    assert reachable(overlay, OUTSIDE, labels_of(overlay, "gateway"), 8080)
    for service in SERVICES:
        target = labels_of(overlay, service)
        port = service_port(service)
        assert not reachable(overlay, OUTSIDE, target, port), service
        assert not reachable(overlay, STRANGER, target, port), service
        for caller in ("gateway", *SERVICES):
            source = pod(f"knowledge-{caller}")
            assert reachable(overlay, source, target, port) == (caller in CALLERS[service]), (caller, service)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_embedder_is_reachable_only_from_ingest_search_documents_ai_and_the_mcp_adapter(overlay):
    target = labels_of(overlay, "embedder")
    for port in (service_port("embedder"), 8080, 9464, 50000):
        allowed = {
            name
            for name in ("gateway", "content-index", "ingest", "search", "documents-ai", "migrate", "embedder", "mcp")
            if reachable(overlay, pod(f"knowledge-{name}"), target, port)
        }
        expected = {"ingest", "search", "documents-ai", "mcp"} if port == service_port("embedder") else set()
        assert allowed == expected, port


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_the_services_reach_postgresql(overlay):
    database = {"cnpg.io/cluster": "knowledge-db", "cnpg.io/instanceRole": "primary"}
    for service in DATABASE_SERVICES:
        assert reachable(overlay, pod(f"knowledge-{service}"), database, 5432), service
    assert reachable(overlay, MIGRATE, database, 5432)
    for source in (GATEWAY, STRANGER, OUTSIDE, pod("knowledge-mcp")):
        assert not reachable(overlay, source, database, 5432), source["labels"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_prometheus_scrapes_only_the_metrics_port(overlay):
    prometheus = pod("prometheus", namespace="monitoring")
    for service in SERVICES:
        target = labels_of(overlay, service)
        assert reachable(overlay, prometheus, target, METRICS_PORT), service
        assert not reachable(overlay, prometheus, target, service_port(service)), service


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_gc_pass_reaches_content_index_and_nothing_else(overlay):
    gc = pod("knowledge-gc")
    assert reachable(overlay, gc, labels_of(overlay, "content-index"), service_port("content-index"))
    for service in ("embedder", "ingest", "search"):
        assert not reachable(overlay, gc, labels_of(overlay, service), service_port(service)), service
