"""The remote encoder against a fake transport (the real server's tests are in
tests/integration/test_embedder_remote.py): retries with backoff, the breaker, a refusal as such,
what is sent; and the prompts the model's configuration names, on every input."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import httpx
import numpy as np
import pytest
from knowledge_embedder.adapters.model_files import model_prompts
from knowledge_embedder.adapters.remote_encoder import RemoteEncoder
from knowledge_embedder.batching.runner import ForwardPass
from knowledge_embedder.config import EmbedderSettings, RemoteSettings, prompts_of, prompts_setting
from knowledge_embedder.domain.errors import EmbeddingServerRejected, EmbeddingServerUnavailable
from knowledge_embedder.domain.model import Prompts, TextInput
from knowledge_runtime.settings import Env, SettingsError
from tokenizers import Tokenizer, models, pre_tokenizers

DIMENSION = 4


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def tokenizer_dir(tmp_path: Path) -> Path:
    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    return tmp_path


def remote(**overrides) -> RemoteSettings:
    settings = RemoteSettings(
        url="http://embed.test/v1",
        model="m",
        api_key="k3y",
        timeout_s=1.0,
        input_type=True,
        concurrency=2,
        attempts=3,
        cool_off_s=5.0,
    )
    return replace(settings, **overrides)


def answer(request: httpx.Request) -> httpx.Response:
    texts = json.loads(request.content)["input"]
    # Out of order and not unit length: the encoder orders by index and normalises.
    data = [{"index": i, "embedding": [float(i + 1)] * DIMENSION} for i in range(len(texts))]
    return httpx.Response(200, json={"data": list(reversed(data)), "usage": {"total_tokens": 3}})


def encoder(tokenizer_dir: Path, handler, **overrides) -> tuple[RemoteEncoder, Clock]:
    clock = Clock()
    built = RemoteEncoder(
        "m",
        tokenizer_dir,
        remote(**overrides),
        max_seq_length=512,
        batch_size=2,
        transport=httpx.MockTransport(handler),
        clock=clock,
    )
    return built, clock


def test_a_request_carries_model_input_type_and_credential_and_answers_unit_rows_in_order(tokenizer_dir):
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answer(request)

    remote_encoder, _ = encoder(tokenizer_dir, handler)
    vectors = remote_encoder.encode(["a", "b", "c"], query=True)
    assert len(seen) == 2  # batch_size 2: two requests
    assert seen[0].url == "http://embed.test/v1/embeddings"
    assert seen[0].headers["authorization"] == "Bearer k3y"
    body = json.loads(seen[0].content)
    assert (body["model"], body["input"], body["input_type"]) == ("m", ["a", "b"], "query")
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert vectors.shape == (3, DIMENSION)


def test_transient_failures_are_retried_then_the_breaker_opens_and_a_probe_closes_it(tokenizer_dir, monkeypatch):
    monkeypatch.setattr("tenacity.nap.time.sleep", lambda _s: None)
    calls = {"n": 0, "down": True}

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["down"]:
            return httpx.Response(503)
        return answer(request)

    remote_encoder, clock = encoder(tokenizer_dir, handler)
    with pytest.raises(EmbeddingServerUnavailable):
        remote_encoder.encode(["a"])
    assert calls["n"] == 3  # the configured attempts
    with pytest.raises(EmbeddingServerUnavailable, match="breaker"):
        remote_encoder.encode(["a"])
    assert calls["n"] == 3  # refused without a request while open
    calls["down"] = False
    clock.now += 5.0
    assert remote_encoder.encode(["a"]).shape == (1, DIMENSION)  # the probe
    assert remote_encoder.encode(["a"]).shape == (1, DIMENSION)  # closed again


def test_an_unreachable_server_is_transient_and_a_4xx_is_a_refusal_without_retries(tokenizer_dir, monkeypatch):
    monkeypatch.setattr("tenacity.nap.time.sleep", lambda _s: None)

    def unreachable(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    remote_encoder, _ = encoder(tokenizer_dir, unreachable, attempts=2)
    with pytest.raises(EmbeddingServerUnavailable, match="unreachable"):
        remote_encoder.encode(["a"])

    calls = {"n": 0}

    def unauthorised(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        return httpx.Response(401, json={"error": {"message": "bad key"}})

    remote_encoder, _ = encoder(tokenizer_dir, unauthorised)
    for _ in range(2):
        with pytest.raises(EmbeddingServerRejected, match="401"):
            remote_encoder.encode(["a"])
    assert calls["n"] == 2  # no retries, and the breaker stays closed: the server answered


def test_a_remote_backend_needs_the_models_tokenizer(tmp_path):
    with pytest.raises(SettingsError, match="tokenizer.json"):
        RemoteEncoder("m", tmp_path, remote(), max_seq_length=512, batch_size=0)


def test_remote_settings_are_read_and_checked():
    env = {
        "KNOWLEDGE_EMBEDDING_MODEL": "/models/e5",
        "KNOWLEDGE_EMBEDDING_BACKEND": "remote",
        "KNOWLEDGE_EMBEDDER_REMOTE_URL": "http://tei:8080/v1/",
        "KNOWLEDGE_EMBEDDER_REMOTE_MODEL": "intfloat/multilingual-e5-small",
    }
    settings = EmbedderSettings.from_env(Env(env))
    assert settings.remote is not None and settings.remote.url == "http://tei:8080/v1"
    assert settings.model_id == "intfloat/multilingual-e5-small"  # what the server serves
    assert settings.bulk_batch_tokens_on("remote") == 2048
    with pytest.raises(SettingsError, match="EMBEDDER_REMOTE_URL"):
        EmbedderSettings.from_env(Env({**env, "KNOWLEDGE_EMBEDDER_REMOTE_URL": "tei:8080"}))
    with pytest.raises(SettingsError, match="EMBEDDER_REMOTE_MODEL"):
        EmbedderSettings.from_env(Env({k: v for k, v in env.items() if "REMOTE_MODEL" not in k}))


def test_prompts_come_from_the_setting_or_the_models_configuration(tmp_path):
    assert prompts_setting(Env({"KNOWLEDGE_EMBEDDING_PROMPTS": '{"query": "query: ", "passage": "passage: "}'})) == (
        Prompts(query="query: ", passage="passage: ")
    )
    assert prompts_setting(Env({})) is None
    with pytest.raises(SettingsError, match="EMBEDDING_PROMPTS"):
        prompts_setting(Env({"KNOWLEDGE_EMBEDDING_PROMPTS": "query: "}))
    (tmp_path / "config_sentence_transformers.json").write_text(
        json.dumps({"prompts": {"query": "Represent this question: ", "document": "doc: "}})
    )
    assert prompts_of(model_prompts(tmp_path)) == Prompts(query="Represent this question: ", passage="doc: ")


def test_each_input_is_read_after_its_prompt_and_the_encoder_is_told_which_it_is():
    calls: list[tuple[list[str], bool]] = []

    class Recording:
        def encode(self, texts, *, query: bool = False) -> np.ndarray:
            calls.append((list(texts), query))
            return np.ones((len(texts), DIMENSION), dtype=np.float32)

    forward = ForwardPass(Recording(), None, Prompts(query="query: ", passage="passage: "))  # type: ignore[arg-type]
    results = forward([TextInput("q1", query=True), TextInput("p1"), TextInput("p2")])
    assert len(results) == 3
    assert sorted(calls) == [(["passage: p1", "passage: p2"], False), (["query: q1"], True)]
