"""The web console as the gateway serves it: its page and files answered by Envoy (the real binary
validates the routes), its settings, the development sign-in only where configured (never in a
rendered deployment), the switch that turns it off, and assets that load nothing from elsewhere."""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

from knowledge_gateway.config import GatewayConfig
from knowledge_gateway.console import (
    CONTENT_SECURITY_POLICY,
    DEV_SIGN_IN_CLUSTER,
    DEV_TOKEN_PATH,
    SOURCE_DIR,
    console_files,
)
from knowledge_gateway.descriptors import write_descriptor_set
from knowledge_gateway.envoy import render, write_config
from knowledge_gateway.render import gateway_config, read_env_files

ROOT = Path(__file__).resolve().parents[2]
ENVOY = Path(sys.executable).parent / "envoy"
# What the README says the console weighs, gzipped; a change past it should be a decision.
MAX_GZIPPED_BYTES = 32 * 1024


def config(tmp_path: Path, jwks: Path, **changes) -> GatewayConfig:
    base = GatewayConfig(
        listen_host="127.0.0.1",
        listen_port=18080,
        admin_port=0,
        upstreams={"ingest": "127.0.0.1:1", "search": "127.0.0.1:2", "documents-ai": "127.0.0.1:3"},
        jwks_path=jwks,
        issuer="knowledge-dev",
        audience="knowledge",
        descriptor_path=write_descriptor_set(tmp_path / "knowledge.pb"),
    )
    return dataclasses.replace(base, **changes)


def routes(bootstrap: dict) -> list[dict]:
    manager = bootstrap["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    return manager["route_config"]["virtual_hosts"][0]["routes"]


def by_path(bootstrap: dict) -> dict[str, dict]:
    return {r["match"]["path"]: r for r in routes(bootstrap) if "path" in r["match"]}


def test_the_page_and_every_file_are_answered_by_envoy_with_their_type_and_policy(tmp_path, keys_dir):
    rendered = render(config(tmp_path, keys_dir / "jwks.json"))
    found = by_path(rendered)
    assert found["/"]["direct_response"]["body"]["filename"] == str(SOURCE_DIR / "index.html")
    assert {"index.html", "app.js", "api.js", "console.css"} <= set(console_files())
    for name in console_files():
        route = found[f"/console/{name}"]
        assert route["direct_response"]["body"]["filename"] == str(SOURCE_DIR / name)
        headers = {h["header"]["key"]: h["header"]["value"] for h in route["response_headers_to_add"]}
        assert headers["content-type"].startswith(
            {"html": "text/html", "js": "text/javascript", "css": "text/css"}[name.rsplit(".", 1)[1]]
        )
        assert headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    settings = found["/console/config.json"]["direct_response"]["body"]["inline_string"]
    assert json.loads(settings) == {"dev_sign_in": False}
    assert DEV_TOKEN_PATH not in found  # no development sign-in unless configured
    assert DEV_SIGN_IN_CLUSTER not in {c["name"] for c in rendered["static_resources"]["clusters"]}


def test_the_development_sign_in_is_routed_only_where_configured_and_envoy_accepts_it(tmp_path, keys_dir):
    with_dev = config(tmp_path, keys_dir / "jwks.json", dev_sign_in_address="127.0.0.1:5")
    rendered = render(with_dev)
    found = by_path(rendered)
    assert found[DEV_TOKEN_PATH]["route"]["cluster"] == DEV_SIGN_IN_CLUSTER
    assert json.loads(found["/console/config.json"]["direct_response"]["body"]["inline_string"]) == {
        "dev_sign_in": True
    }
    (cluster,) = [c for c in rendered["static_resources"]["clusters"] if c["name"] == DEV_SIGN_IN_CLUSTER]
    assert cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]["socket_address"] == {
        "address": "127.0.0.1",
        "port_value": 5,
    }
    path = write_config(with_dev, tmp_path / "envoy.json")
    result = subprocess.run(
        [str(ENVOY), "--mode", "validate", "-c", str(path), "--log-level", "error"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_rendered_deployment_never_routes_the_development_sign_in():
    for overlay in ("base", "overlays/production"):
        text = (ROOT / "k8s" / overlay / "gateway" / "envoy.json").read_text()
        assert DEV_TOKEN_PATH not in text and DEV_SIGN_IN_CLUSTER not in text, overlay
        assert '"/console/app.js"' in text, overlay  # the console itself is served
    production = read_env_files([ROOT / "k8s/base/config.env", ROOT / "k8s/overlays/production/config.env"])
    # Even with an address in the settings, render has no way to route one.
    production["KNOWLEDGE_DEV_SIGN_IN_ADDRESS"] = "127.0.0.1:5"
    assert gateway_config(production).dev_sign_in_address is None


def test_the_console_is_turned_off_by_its_setting(tmp_path):
    settings = read_env_files([ROOT / "k8s/base/config.env"])
    assert gateway_config(settings).console_dir == Path("/etc/knowledge/console")
    off = gateway_config({**settings, "KNOWLEDGE_CONSOLE_ENABLED": "false"})
    assert off.console_dir is None
    found = by_path(render(off))
    assert "/" not in found and not [p for p in found if p.startswith("/console/")]


def test_the_assets_load_nothing_from_elsewhere_and_stay_small():
    total = 0
    for name in console_files():
        text = (SOURCE_DIR / name).read_text()
        total += len(gzip.compress(text.encode(), 9))
        for imported in re.findall(r"""^import .* from "([^"]+)";$""", text, re.MULTILINE):
            assert imported.startswith("./"), (name, imported)
        for reference in re.findall(r"""(?:src|href)="([^"]+)\"""", text):
            assert reference.startswith(("/console/", "#", "data:")), (name, reference)
        assert "@import" not in text and "url(http" not in text, name
    assert total <= MAX_GZIPPED_BYTES, f"the console is {total} bytes gzipped"
