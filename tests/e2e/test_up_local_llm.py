"""`knowledge up` with a local GGUF model: it runs the llama.cpp server as the supervised child
``llm``, search answers through it over REST (its cost is the model's), a killed server is
restarted, and the stack's stop takes it along."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from tests.support.local_llm import served_model
from tests.support.stack import running_stack

pytestmark = pytest.mark.e2e

BIN = Path(sys.executable).parent


def status(data_dir: Path) -> dict:
    return json.loads((data_dir / "run" / "status.json").read_text())["children"]


def chat_items(reply: httpx.Response) -> list[dict]:
    assert reply.status_code == 200, reply.text
    return [item for item in reply.json()["cost"]["items"] if item.get("operation") == "chat"]


def test_knowledge_up_runs_supervises_and_answers_through_a_local_model(tmp_path_factory):
    model = served_model()
    with running_stack(
        tmp_path_factory.mktemp("local-llm"), LOCAL_LLM_MODEL=str(model), LOCAL_LLM_THREADS="2", LLM_TIMEOUT_S="120"
    ) as running:
        llm = status(running["data_dir"])["llm"]
        assert llm["state"] == "running"
        server = psutil.Process(llm["pid"])
        assert "llama_cpp.server" in server.cmdline() and str(model) in server.cmdline()
        token = subprocess.run(
            [str(BIN / "knowledge"), "dev-token", "--tenant", "acme"],
            env=running["env"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        headers = {"Authorization": f"Bearer {token}"}
        corpus = httpx.post(f"{running['base']}/corpora", json={"name": "h"}, headers=headers).json()["corpus_id"]
        job = httpx.post(
            f"{running['base']}/upload",
            params={"corpus_id": corpus, "filename": "backups.txt"},
            content=b"Backups run nightly and are kept for thirty days.",
            headers={**headers, "Content-Type": "text/plain"},
        ).json()["job_id"]
        for _ in range(600):
            if httpx.get(f"{running['base']}/ingest/{job}", headers=headers).json()["state"].endswith("SEARCHABLE"):
                break
            time.sleep(0.2)
        question = {"query": "How long are backups kept?", "corpus_id": corpus}
        (item,) = chat_items(httpx.post(f"{running['base']}/query", json=question, headers=headers, timeout=180))
        assert item["model_id"] == model.stem and int(item["input_tokens"]) > 0

        server.kill()  # the supervisor starts it again, on the same port
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            again = status(running["data_dir"])["llm"]
            if again["restarts"] == 1 and again["state"] == "running":
                break
            time.sleep(0.5)
        assert again["restarts"] == 1 and again["pid"] != server.pid
        deadline = time.monotonic() + 120
        while True:  # its model loads again
            reply = httpx.post(f"{running['base']}/query", json=question, headers=headers, timeout=180)
            if reply.status_code == 200 or time.monotonic() > deadline:
                break
            assert reply.status_code == 503, reply.text  # RUNTIME_UNAVAILABLE meanwhile
            time.sleep(1)
        assert chat_items(reply)[0]["model_id"] == model.stem

        restarted = psutil.Process(again["pid"])
        running["process"].send_signal(signal.SIGTERM)
        assert running["process"].wait(timeout=60) == 0
        _, alive = psutil.wait_procs([restarted], timeout=15)
        assert alive == []
