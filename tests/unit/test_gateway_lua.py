"""The Lua of the gateway's Lua filter: package files, filled in and inlined in the bootstrap.

What the Lua does is tested through the real Envoy (test_gateway_bodies, test_gateway_hardening);
here, that the files ship with the package and reach the bootstrap whole."""

import re
import tomllib
from fnmatch import fnmatch
from importlib import resources
from pathlib import Path

import knowledge_gateway
import pytest
from knowledge_gateway.config import GatewayConfig
from knowledge_gateway.envoy import render
from knowledge_gateway.lua import lua_file

PACKAGE = Path(knowledge_gateway.__file__).parent
PLACEHOLDER = re.compile(r"@[A-Z_]+@")


def inline_lua(max_body_bytes: int = 1234) -> str:
    config = GatewayConfig(
        listen_host="127.0.0.1",
        listen_port=8080,
        admin_port=0,
        upstreams={"ingest": "127.0.0.1:1", "search": "127.0.0.1:2", "documents-ai": "127.0.0.1:3"},
        jwks_path=Path("/keys/jwks.json"),
        issuer="iss",
        audience="aud",
        descriptor_path=Path("/d.pb"),
        max_body_bytes=max_body_bytes,
    )
    manager = render(config)["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    (lua,) = [f for f in manager["http_filters"] if f["name"] == "envoy.filters.http.lua"]
    return lua["typed_config"]["default_source_code"]["inline_string"]


def lua_files() -> list[str]:
    return sorted(path.name for path in (PACKAGE / "lua").glob("*.lua"))


def test_the_lua_files_are_package_data():
    """Installed without them (a non-editable install: the container image), the gateway renders nothing."""
    pyproject = tomllib.loads((PACKAGE.parents[1] / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["knowledge_gateway"]
    assert lua_files() == ["entry_points.lua", "json_fields.lua"]
    for name in lua_files():
        assert any(fnmatch(f"lua/{name}", pattern) for pattern in patterns), name
        assert (resources.files("knowledge_gateway") / "lua" / name).read_text()


def test_every_line_of_the_files_is_inlined_with_every_placeholder_filled():
    lua = inline_lua()
    assert PLACEHOLDER.search(lua) is None
    for name in lua_files():
        for line in (PACKAGE / "lua" / name).read_text().splitlines():
            if not PLACEHOLDER.search(line):
                assert line in lua, (name, line)
    assert "size > 1234 then" in lua and "function envoy_on_request" in lua
    assert 'schemas["knowledge.v1.CreateCorpusRequest"]' in lua


def test_a_placeholder_without_a_value_or_a_value_without_a_placeholder_is_an_error():
    with pytest.raises(ValueError, match="SCHEMAS"):
        lua_file("json_fields.lua")
    with pytest.raises(ValueError, match="EXTRA"):
        lua_file("json_fields.lua", SCHEMAS="", EXTRA="x")
    source = lua_file("json_fields.lua", SCHEMAS="-- none")
    assert source.startswith("local schemas = {}\n") and "\n-- none\n" in source and "@" not in source
