"""What stands in for a cluster in `make images-smoke`: podman, the manifests, the probes.

The rendered dev overlay's workloads as `podman kube play` pods on one network (a Service's
names as network aliases), PostgreSQL as a pod of our own image, the Secrets as podman secrets,
and each container's probes run as the kubelet would; plus the run's summary of checks.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
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
