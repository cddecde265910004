"""The local LLM server's configuration in `knowledge up`: the command line, the refusals of a model
that cannot be served, and the services pointed at the server (the server itself runs in
tests/integration/test_local_llm.py and tests/e2e/test_up_local_llm.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from knowledge_cli.local_llm import LocalLlmError, check_model, server_argv
from knowledge_cli.main import parser, up_settings
from knowledge_cli.stack import Stack, StartupFailed
from knowledge_cli.stack_settings import StackSettings
from knowledge_runtime.devkeys import ensure_dev_keys
from knowledge_runtime.settings import Env


def test_the_server_command_binds_the_host_and_port_with_bounded_threads(tmp_path):
    argv = server_argv(tmp_path / "qwen.gguf", host="127.0.0.1", port=5123, threads=2, context=2048)
    assert argv[1:3] == ["-m", "llama_cpp.server"]
    options = dict(zip(argv[3::2], argv[4::2], strict=True))
    assert options == {
        "--model": str(tmp_path / "qwen.gguf"),
        "--model_alias": "qwen",
        "--host": "127.0.0.1",
        "--port": "5123",
        "--n_threads": "2",
        "--n_threads_batch": "2",
        "--n_ctx": "2048",
    }


def test_a_model_that_cannot_be_served_is_refused_saying_why(tmp_path):
    with pytest.raises(LocalLlmError, match="does not exist.*make local-llm"):
        check_model(tmp_path / "missing.gguf")
    (tmp_path / "notes.gguf").write_bytes(b"PK\x03\x04 not a model")
    with pytest.raises(LocalLlmError, match="not a GGUF file"):
        check_model(tmp_path / "notes.gguf")


def test_the_model_comes_from_the_environment_or_the_up_flag(tmp_path, monkeypatch):
    settings = StackSettings.from_env(
        Env(
            {
                "KNOWLEDGE_LOCAL_LLM_MODEL": "/m/a.gguf",
                "KNOWLEDGE_LOCAL_LLM_PORT": "5124",
                "KNOWLEDGE_LOCAL_LLM_THREADS": "1",
            }
        )
    )
    assert (settings.local_llm_model, settings.local_llm_port, settings.local_llm_threads) == (
        Path("/m/a.gguf"),
        5124,
        1,
    )
    assert StackSettings.from_env(Env({})).local_llm_model is None
    monkeypatch.setenv("KNOWLEDGE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("KNOWLEDGE_LOCAL_LLM_MODEL", "/m/a.gguf")
    assert up_settings(parser().parse_args(["up"])).local_llm_model == Path("/m/a.gguf")
    flagged = up_settings(parser().parse_args(["up", "--llm", str(tmp_path / "b.gguf")]))
    assert flagged.local_llm_model == tmp_path / "b.gguf"


def stack_settings(data_dir: Path, model: Path | None) -> StackSettings:
    return StackSettings(
        data_dir=data_dir,
        host="127.0.0.1",
        http_port=1,
        admin_port=0,
        ports={"search": 2},
        database_url="unused",
        embedding_model="unused",
        embedding_model_id="",
        issuer="i",
        audience="a",
        max_upload_bytes=1,
        local_llm_model=model,
    )


def test_the_services_are_pointed_at_the_local_server(tmp_path, monkeypatch):
    monkeypatch.setenv("KNOWLEDGE_LLM_URL", "https://hosted.example/v1")
    monkeypatch.setenv("KNOWLEDGE_LLM_API_KEY", "sk-hosted")
    jwks = ensure_dev_keys(tmp_path / "keys")
    without = Stack(stack_settings(tmp_path, None))._service_env(jwks, "postgresql://x")
    assert without["KNOWLEDGE_LLM_URL"] == "https://hosted.example/v1"  # no local model: as configured
    stack = Stack(stack_settings(tmp_path, tmp_path / "qwen.gguf"))
    stack.llm_url = "http://127.0.0.1:5125/v1"
    env = stack._service_env(jwks, "postgresql://x")
    assert (env["KNOWLEDGE_LLM_URL"], env["KNOWLEDGE_LLM_MODEL"]) == ("http://127.0.0.1:5125/v1", "qwen")
    assert "KNOWLEDGE_LLM_API_KEY" not in env  # the hosted key does not go to the local server


async def test_the_stack_refuses_to_start_a_model_that_is_not_gguf(tmp_path):
    (tmp_path / "x.gguf").write_text("no")
    stack = Stack(stack_settings(tmp_path, tmp_path / "x.gguf"))
    with pytest.raises(StartupFailed, match="not a GGUF file"):
        await stack._start_local_llm(tmp_path / "x.gguf")
    assert stack.children == []  # nothing was started
