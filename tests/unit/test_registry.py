"""The service registry: one entry per process, each gRPC service in exactly one of them."""

from collections import Counter

import pytest
from knowledge_runtime import registry
from knowledge_runtime.settings import CommonSettings, Env, service_address


def test_ports_prefixes_roles_and_modules_are_unique():
    for field in ("name", "port", "settings_prefix", "database_role", "module"):
        values = Counter(getattr(entry, field) for entry in registry.SERVICES)
        assert [value for value, count in values.items() if count > 1] == [], field


def test_every_generated_grpc_service_belongs_to_exactly_one_entry():
    """A service added to a proto without a registry entry fails here: nothing would start,
    probe or route it."""
    served = Counter(name for entry in registry.SERVICES for name in entry.grpc_services)
    assert set(served) == set(registry.generated_services())
    assert [name for name, count in served.items() if count > 1] == []


def test_the_gateway_exposes_ingest_search_and_documents_ai_and_the_mcp_path_only():
    assert [entry.name for entry in registry.public_services()] == ["ingest", "search", "documents-ai"]
    assert [(entry.name, entry.http_path) for entry in registry.public_http_services()] == [("mcp", "/mcp")]


def test_an_http_process_serves_no_grpc_and_holds_no_database_role():
    mcp = registry.service("mcp")
    assert mcp.is_http and mcp.grpc_services == () and mcp.database_role is None
    assert mcp not in registry.grpc_processes() and mcp not in registry.with_database()
    assert registry.SERVICES[-1] is mcp  # started last: it calls the others
    with pytest.raises(ValueError, match="/readyz"):
        _ = mcp.health_name
    assert {e.name for e in registry.with_database()} == {e.name for e in registry.grpc_processes()}


def test_a_full_name_finds_its_process_and_its_descriptor():
    for entry in registry.grpc_processes():
        assert entry.health_name == entry.grpc_services[0]
        for name in entry.grpc_services:
            assert registry.serving(name) is entry
            assert registry.grpc_descriptor(name).full_name == name
    with pytest.raises(KeyError, match="knowledge_runtime.registry"):
        registry.serving("knowledge.v1.NoSuchService")
    with pytest.raises(KeyError, match="content-index, embedder"):
        registry.service("no-such-service")


def test_settings_read_the_entry_port_and_address(tmp_path):
    for entry in registry.SERVICES:
        environ = {"KNOWLEDGE_DATA_DIR": str(tmp_path)}
        assert CommonSettings.from_env(entry.name, Env(environ)).port == entry.port
        assert service_address(entry.name, Env(environ)) == f"127.0.0.1:{entry.port}"
        moved = {**environ, f"KNOWLEDGE_{entry.port_setting}": "7000"}
        assert CommonSettings.from_env(entry.name, Env(moved)).port == 7000
        assert service_address(entry.name, Env(moved)) == "127.0.0.1:7000"
        elsewhere = {**environ, f"KNOWLEDGE_{entry.address_setting}": "other:1"}
        assert service_address(entry.name, Env(elsewhere)) == "other:1"
