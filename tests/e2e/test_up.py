"""`knowledge up` end to end: the whole stack through Envoy, then a clean stop."""

import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest
from knowledge_runtime import registry

from tests.support.stack import running_stack

pytestmark = pytest.mark.e2e

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("stack")) as running:
        yield running


def dev_token(stack, tenant: str, capabilities: str | None = None) -> str:
    args = [str(BIN / "knowledge"), "dev-token", "--tenant", tenant]
    if capabilities is not None:
        args += ["--capabilities", capabilities]
    return subprocess.run(args, env=stack["env"], capture_output=True, text=True, check=True).stdout.strip()


def test_ready_line_names_the_rest_url_and_the_grpc_addresses(stack):
    env = stack["env"]
    assert stack["base"] in stack["line"]
    grpc_at = (
        f"gRPC: gateway 127.0.0.1:{stack['port']}, ingest 127.0.0.1:{env['KNOWLEDGE_INGEST_PORT']}, "
        f"search 127.0.0.1:{env['KNOWLEDGE_SEARCH_PORT']}, documents-ai 127.0.0.1:{env['KNOWLEDGE_DOCUMENTS_AI_PORT']};"
    )
    assert grpc_at in stack["line"]


def test_no_token_is_401_and_a_dev_token_is_200(stack):
    assert httpx.get(f"{stack['base']}/corpora").status_code == 401
    headers = {"Authorization": f"Bearer {dev_token(stack, 'acme')}"}
    reply = httpx.get(f"{stack['base']}/corpora", headers=headers)
    assert reply.status_code == 200
    assert reply.json() == {"corpora": [], "next_page_token": ""}


def test_corpora_through_the_gateway(stack):
    acme = {"Authorization": f"Bearer {dev_token(stack, 'acme-2')}"}
    other = {"Authorization": f"Bearer {dev_token(stack, 'other-2')}"}
    created = httpx.post(f"{stack['base']}/corpora", json={"name": "Handbook", "description": "HR"}, headers=acme)
    assert created.status_code == 200
    body = created.json()
    assert body["name"] == "Handbook" and isinstance(body["corpus_id"], str)
    duplicate = httpx.post(f"{stack['base']}/corpora", json={"name": "Handbook"}, headers=acme)
    assert duplicate.status_code == 409
    assert duplicate.json()["details"][0]["reason"] == "CORPUS_ALREADY_EXISTS"
    listed = httpx.get(f"{stack['base']}/corpora", headers=acme).json()["corpora"]
    assert [c["corpus_id"] for c in listed] == [body["corpus_id"]]
    assert httpx.get(f"{stack['base']}/corpora", headers=other).json()["corpora"] == []


def test_missing_capability_is_403_naming_it(stack):
    headers = {"Authorization": f"Bearer {dev_token(stack, 'acme', 'search')}"}
    reply = httpx.get(f"{stack['base']}/corpora", headers=headers)
    assert reply.status_code == 403
    assert "corpus.read" in reply.json()["message"]


def test_bad_input_is_400_not_500(stack):
    headers = {"Authorization": f"Bearer {dev_token(stack, 'acme')}"}
    assert httpx.post(f"{stack['base']}/corpora", json={"name": ""}, headers=headers).status_code == 400
    assert httpx.get(f"{stack['base']}/corpora", params={"page_token": "garbage"}, headers=headers).status_code == 400
    assert httpx.get(f"{stack['base']}/nothing-here", headers=headers).status_code == 404


def test_knowledge_eval_through_the_rest_api(stack, tmp_path):
    """`knowledge eval` ingests through the public API and scores every mode, as a user runs it."""
    import json

    dataset = Path(__file__).resolve().parents[1] / "data" / "search_eval"
    out = tmp_path / "eval.json"
    run = subprocess.run(
        [
            str(BIN / "knowledge"),
            "eval",
            str(dataset),
            "--base-url",
            stack["base"],
            "--limit",
            "5",
            "--modes",
            "vector,lexical,hybrid",
            "--json",
            str(out),
            "--progress",
            "--tenant",
            "eval-e2e",
        ],
        env=stack["env"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    for column in ("nDCG@10", "Recall@100", "MRR@10", "p50 ms", "p95 ms"):
        assert column in run.stdout
    assert "ingesting" in run.stderr and "querying" in run.stderr and "doc/s" in run.stderr  # the progress bars
    figures = json.loads(out.read_text())
    assert figures["split"] == "test" and set(figures["modes"]) == {"VECTOR", "LEXICAL", "HYBRID"}
    for values in figures["modes"].values():
        assert values["ndcg@10"] > 0.5 and values["recall@100"] > 0.7 and 0 < values["p50_ms"] <= values["p95_ms"]
    # --rerank without a configured reranking model is a clear refusal, never a silent no-op.
    refused = subprocess.run(
        [
            str(BIN / "knowledge"),
            "eval",
            str(dataset),
            "--base-url",
            stack["base"],
            "--limit",
            "0",
            "--modes",
            "hybrid",
            "--rerank",
        ],
        env=stack["env"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert refused.returncode == 1 and "RUNTIME_UNAVAILABLE" in refused.stderr
    search = httpx.post(
        f"{stack['base']}/search",
        json={"query": "vacation", "rerank": True},
        headers={"Authorization": f"Bearer {dev_token(stack, 'eval-e2e')}"},
    )  # a tenant with chunks
    assert search.status_code == 503 and search.json()["details"][0]["reason"] == "RUNTIME_UNAVAILABLE"


def test_rerank_through_rest_with_a_configured_model(tmp_path_factory, cross_encoder_dir):
    """A stack whose embedder has a reranking model: rerank: true re-scores the results over REST."""
    with running_stack(
        tmp_path_factory.mktemp("rerank"), RERANK_MODEL=str(cross_encoder_dir), RERANK_MODEL_ID="local/cross-encoder"
    ) as running:
        headers = {"Authorization": f"Bearer {dev_token(running, 'acme')}"}
        corpus = httpx.post(f"{running['base']}/corpora", json={"name": "r"}, headers=headers).json()["corpus_id"]
        texts = [
            "Backups run nightly and are kept for thirty days.",
            "Employees may work remotely two days a week.",
            "The cafeteria serves lunch from noon.",
        ]
        for i, text in enumerate(texts):
            job = httpx.post(
                f"{running['base']}/upload",
                params={"corpus_id": corpus, "filename": f"t{i}.txt"},
                content=text.encode(),
                headers={**headers, "Content-Type": "text/plain"},
            ).json()["job_id"]
            for _ in range(600):
                if httpx.get(f"{running['base']}/ingest/{job}", headers=headers).json()["state"].endswith("SEARCHABLE"):
                    break
                time.sleep(0.2)
        body = {"query": "how long are backups kept", "corpus_id": corpus, "rerank": True}
        reranked = httpx.post(f"{running['base']}/search", json=body, headers=headers)
        assert reranked.status_code == 200, reranked.text
        scores = [r.get("rerank_score", 0.0) for r in reranked.json()["results"]]
        assert len(scores) == 3 and all(s != 0.0 for s in scores) and scores == sorted(scores, reverse=True)
        plain = httpx.post(f"{running['base']}/search", json={**body, "rerank": False}, headers=headers).json()
        assert all(not r.get("rerank_score") for r in plain["results"])


def test_sigterm_stops_every_process_of_the_stack(stack):
    process, descendants = stack["process"], stack["descendants"]
    # the registry's processes (the MCP adapter among them) are the launcher's own children
    # (ingest's extraction fork server and its resource tracker are python descendants too, and
    # must stop with it all the same)
    children = psutil.Process(process.pid).children()
    assert sum(p.name().startswith("python") for p in children) == len(registry.SERVICES)
    assert "envoy" in {p.name() for p in descendants}
    database = processes_using(stack["data_dir"])  # pg_ctl daemonises PostgreSQL: not a descendant
    assert database, "the embedded PostgreSQL should run under the data dir"
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0
    _, alive = psutil.wait_procs(descendants + database, timeout=15)
    assert alive == []
    assert processes_using(stack["data_dir"]) == []


def processes_using(data_dir: Path) -> list[psutil.Process]:
    found = []
    for candidate in psutil.process_iter(["cmdline"]):
        if str(data_dir) in " ".join(candidate.info["cmdline"] or []):
            found.append(candidate)
    return found


def test_a_killed_knowledge_up_takes_its_services_and_gateway_along(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("killed")) as running:
        children = running["descendants"]
        try:
            assert len(children) >= 5
            running["process"].send_signal(signal.SIGKILL)
            running["process"].wait(10)
            _, alive = psutil.wait_procs(children, timeout=20)
            assert alive == []
        finally:
            for leftover in processes_using(running["data_dir"]):  # the daemonised PostgreSQL, at least
                leftover.terminate()


def test_the_embedded_stack_encodes_with_the_int8_export_on_a_machine_without_an_accelerator(stack):
    import json

    import torch

    if torch.cuda.is_available() or torch.backends.mps.is_available():
        pytest.skip("this machine has an accelerator: auto runs torch there")
    log = (stack["data_dir"] / "logs" / "embedder.log").read_text()
    loaded = [json.loads(line) for line in log.splitlines() if '"model_loaded"' in line]
    assert loaded and (loaded[-1]["backend"], loaded[-1]["configured_backend"]) == ("onnx-int8", "auto")
