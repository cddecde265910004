"""Each service as its own process: starts, reports SERVING, stops on SIGTERM; bad config exits 2."""

import signal
import subprocess
import sys

import pytest
from knowledge_runtime.registry import service

from tests.support.net import free_port
from tests.support.processes import module, service_env, wait_serving

pytestmark = pytest.mark.integration

SERVICES = ("content-index", "embedder", "ingest", "search")


@pytest.mark.parametrize("name", sorted(SERVICES))
async def test_service_serves_then_stops_on_sigterm(name, migrated_pg, keys_dir, tmp_path):
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", module(name)],
        env=service_env(name, port, migrated_pg, keys_dir, tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        await wait_serving(f"127.0.0.1:{port}", service(name).health_name, process)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
    logs = process.stderr.read().decode()
    assert '"event": "shutdown_requested"' in logs and '"event": "server_stopped"' in logs


@pytest.mark.parametrize(
    ("extra", "variable"),
    [
        ({"KNOWLEDGE_INGEST_PORT": "not-a-port"}, "KNOWLEDGE_INGEST_PORT"),
        ({"KNOWLEDGE_JWKS_PATH": "/nonexistent/jwks.json"}, "KNOWLEDGE_JWKS_PATH"),
        ({"KNOWLEDGE_LOG_LEVEL": "chatty"}, "KNOWLEDGE_LOG_LEVEL"),
        ({"KNOWLEDGE_DATABASE_URL": "postgresql://nobody@/knowledge?host=/nonexistent"}, "KNOWLEDGE_DATABASE_URL"),
    ],
)
def test_invalid_configuration_stops_the_process_naming_the_variable(extra, variable, migrated_pg, keys_dir, tmp_path):
    env = service_env("ingest", free_port(), migrated_pg, keys_dir, tmp_path, **extra)
    result = subprocess.run(
        [sys.executable, "-m", "knowledge_ingest"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert variable in result.stderr
    assert "Traceback" not in result.stderr


def test_the_embedder_needs_its_model_configured(migrated_pg, keys_dir, tmp_path):
    env = service_env("embedder", free_port(), migrated_pg, keys_dir, tmp_path)
    del env["KNOWLEDGE_EMBEDDING_MODEL"]
    result = subprocess.run(
        [sys.executable, "-m", "knowledge_embedder"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2 and "KNOWLEDGE_EMBEDDING_MODEL" in result.stderr
