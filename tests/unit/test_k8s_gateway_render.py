"""`python -m knowledge_gateway.render`: Envoy's files for Kubernetes, accepted by the real Envoy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from knowledge_gateway.console import SOURCE_DIR as CONSOLE_SOURCE_DIR
from knowledge_gateway.descriptors import descriptor_bytes
from knowledge_gateway.openapi import committed_path, openapi_text
from knowledge_gateway.render import DESCRIPTOR_NAME, OPENAPI_NAME, main, read_env_files

ROOT = Path(__file__).resolve().parents[2]
ENVOY = Path(sys.executable).parent / "envoy"
COMMITTED = {
    "base": ROOT / "k8s" / "base" / "gateway" / "envoy.json",
    "production": ROOT / "k8s" / "overlays" / "production" / "gateway" / "envoy.json",
}


def clusters(bootstrap: dict) -> dict[str, dict]:
    return {c["name"]: c for c in bootstrap["static_resources"]["clusters"]}


def endpoint(cluster: dict) -> tuple[str, int]:
    address = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]["socket_address"]
    return address["address"], address["port_value"]


def test_renders_kubernetes_upstreams_from_env_files(tmp_path, capsys):
    first = tmp_path / "base.env"
    first.write_text(
        "# comment\nKNOWLEDGE_INGEST_ADDRESS=knowledge-ingest.ns.svc.cluster.local:50153\n"
        "KNOWLEDGE_SEARCH_ADDRESS=wrong:1\nKNOWLEDGE_JWT_ISSUER=first\n"
        "KNOWLEDGE_DOCUMENTS_AI_ADDRESS=knowledge-documents-ai.ns.svc.cluster.local:50155\n"
    )
    second = tmp_path / "overlay.env"
    second.write_text(
        "KNOWLEDGE_SEARCH_ADDRESS=knowledge-search.ns.svc.cluster.local:50154\nKNOWLEDGE_JWT_ISSUER=https://idp/\n"
    )
    out = tmp_path / "out"
    assert main(["--env-file", str(first), "--env-file", str(second), "--out", str(out)]) == 0
    bootstrap = json.loads((out / "envoy.json").read_text())
    found = clusters(bootstrap)
    assert endpoint(found["ingest"]) == ("knowledge-ingest.ns.svc.cluster.local", 50153)
    assert endpoint(found["search"]) == ("knowledge-search.ns.svc.cluster.local", 50154)  # later file wins
    assert {c["type"] for c in found.values()} == {"STRICT_DNS"}
    listener = bootstrap["static_resources"]["listeners"][0]["address"]["socket_address"]
    assert listener == {"address": "0.0.0.0", "port_value": 8080}
    text = json.dumps(bootstrap)
    assert '"issuer": "https://idp/"' in text
    assert '"proto_descriptor": "/etc/envoy/knowledge.pb"' in text
    assert (out / DESCRIPTOR_NAME).read_bytes() == descriptor_bytes()
    assert '"filename": "/etc/envoy/openapi.json"' in text
    assert (out / OPENAPI_NAME).read_text() == openapi_text()
    assert str(out / "envoy.json") in capsys.readouterr().out


def test_reads_the_environment_without_env_files(tmp_path, monkeypatch):
    monkeypatch.setenv("KNOWLEDGE_INGEST_ADDRESS", "ingest.example:7000")
    monkeypatch.setenv("KNOWLEDGE_HTTP_PORT", "9000")
    assert main(["--out", str(tmp_path), "--config-dir", "/config"]) == 0
    bootstrap = json.loads((tmp_path / "envoy.json").read_text())
    assert endpoint(clusters(bootstrap)["ingest"]) == ("ingest.example", 7000)
    assert bootstrap["static_resources"]["listeners"][0]["address"]["socket_address"]["port_value"] == 9000
    assert '"/config/knowledge.pb"' in json.dumps(bootstrap)


def test_a_bad_setting_exits_2_naming_it(tmp_path, capsys):
    bad = tmp_path / "bad.env"
    bad.write_text("KNOWLEDGE_HTTP_PORT=eighty\n")
    assert main(["--env-file", str(bad), "--out", str(tmp_path / "out")]) == 2
    assert "KNOWLEDGE_HTTP_PORT" in capsys.readouterr().err
    broken = tmp_path / "broken.env"
    broken.write_text("no equals sign\n")
    assert main(["--env-file", str(broken), "--out", str(tmp_path / "out")]) == 2
    assert read_env_files([]) == {}


def test_envoy_accepts_the_committed_kubernetes_configs(tmp_path, keys_dir):
    """The real Envoy validates each committed envoy.json, with its mount paths pointed at local files."""
    descriptor = tmp_path / "knowledge.pb"
    descriptor.write_bytes(descriptor_bytes())
    for name, path in COMMITTED.items():
        text = path.read_text()
        text = text.replace("/etc/envoy/knowledge.pb", str(descriptor))
        text = text.replace("/etc/envoy/openapi.json", str(committed_path()))
        text = text.replace("/etc/knowledge/jwks/jwks.json", str(keys_dir / "jwks.json"))
        text = text.replace("/etc/knowledge/console", str(CONSOLE_SOURCE_DIR))
        local = tmp_path / f"{name}.json"
        local.write_text(text)
        result = subprocess.run(
            [str(ENVOY), "--mode", "validate", "-c", str(local), "--log-level", "error"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, name + "\n" + result.stdout + result.stderr


def test_skip_descriptor_writes_the_config_only(tmp_path):
    assert main(["--out", str(tmp_path), "--skip-descriptor"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["envoy.json"]


def test_the_make_target_renders_what_the_tests_check():
    makefile = (ROOT / "Makefile").read_text()
    target = makefile.split("k8s-gateway: setup", 1)[1].split("\n\n", 1)[0]
    assert "--out k8s/base/gateway" in target
    assert "--env-file k8s/overlays/production/config.env --out k8s/overlays/production/gateway" in target
