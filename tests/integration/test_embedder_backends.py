"""The ONNX int8 backend against the torch backend, and the embedder process's start-up checks."""

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from knowledge_cli.stack_settings import default_embedding_model
from knowledge_embedder.adapters.onnx_encoder import OnnxEncoder
from knowledge_embedder.adapters.onnx_export import cache_path
from knowledge_embedder.adapters.torch_encoder import TorchEncoder
from knowledge_runtime.process import usable_cores

from tests.support.net import free_port

pytestmark = pytest.mark.integration

TEXTS = [
    "The quarterly report shows revenue grew by twelve percent.",
    "Employees may work remotely up to three days a week with approval from their manager.",
    "Backups run nightly and are kept for thirty days in a separate region.",
    "A cat sat on the warm windowsill all afternoon, watching birds.",
    "Invoices must be approved before the end of the month.",
    "The API returns a 404 status when the document belongs to another tenant.",
    "Kubernetes scales the embedder on GPU nodes by its queue depth.",
    "Safety training is mandatory for everyone who works in the warehouse.",
    "short",
    " ".join(f"Paragraph sentence {i} about data retention and privacy rules." for i in range(80)),
]


@pytest.fixture(scope="module")
def model_dir() -> Path:
    return Path(default_embedding_model())


def test_onnx_int8_agrees_with_torch_and_is_cached_beside_the_model(model_dir, tmp_path):
    torch_vectors = TorchEncoder(str(model_dir), model_dir, device="cpu", max_seq_length=1024, batch_size=0).encode(
        TEXTS
    )
    onnx = OnnxEncoder(str(model_dir), model_dir, cache_root=tmp_path, max_seq_length=1024, batch_size=4)
    assert (onnx.dimension, onnx.max_seq_length, onnx.backend, onnx.device) == (384, 256, "onnx-int8", "cpu")
    # Its threads sleep between runs instead of spinning on the cores the other services need.
    assert onnx._session.get_session_options().get_session_config_entry("session.intra_op.allow_spinning") == "0"
    onnx_vectors = onnx.encode(TEXTS)
    assert np.allclose(np.linalg.norm(onnx_vectors, axis=1), 1.0, atol=1e-5)
    cosines = (torch_vectors * onnx_vectors).sum(axis=1)
    assert cosines.mean() >= 0.98 and cosines.min() >= 0.95, cosines
    cached = cache_path(model_dir, tmp_path)
    assert cached.parent == model_dir / "onnx" and cached.exists()
    built = cached.stat().st_mtime_ns
    OnnxEncoder(str(model_dir), model_dir, cache_root=tmp_path, max_seq_length=1024, batch_size=4)
    assert cached.stat().st_mtime_ns == built  # loaded from the cache, not exported again
    short, long = onnx.measure(TEXTS[-2:])
    assert short.tokens == 3 and not short.pooled and long.pooled and all(w.tokens <= 256 for w in long.windows)
    assert (
        onnx.tokenizer_id
        == TorchEncoder(str(model_dir), model_dir, device="cpu", max_seq_length=1024, batch_size=0).tokenizer_id
    )


def test_onnx_lanes_run_single_threaded_passes_at_once_with_the_same_vectors(model_dir, tmp_path):
    one = OnnxEncoder(str(model_dir), model_dir, cache_root=tmp_path, max_seq_length=1024, batch_size=2)
    lanes = OnnxEncoder(str(model_dir), model_dir, cache_root=tmp_path, max_seq_length=1024, batch_size=2, lanes=2)
    assert lanes.lanes == 2 and lanes._session.get_session_options().intra_op_num_threads == max(1, usable_cores() // 2)
    # int8 activations are quantised per pass: the same passes (texts, sub-batches), the same vectors
    expected = [one.encode(TEXTS[:5]), one.encode(TEXTS[5:])]
    with ThreadPoolExecutor(max_workers=2) as pool:  # as the queue's two lanes call it
        halves = list(pool.map(lanes.encode, [TEXTS[:5], TEXTS[5:]] * 4))
    for index, vectors in enumerate(halves):
        assert np.allclose(vectors, expected[index % 2], atol=1e-4)


def test_onnx_passes_hold_texts_of_one_length_so_a_text_gets_the_vector_it_gets_alone(model_dir, tmp_path):
    onnx = OnnxEncoder(str(model_dir), model_dir, cache_root=tmp_path, max_seq_length=1024, batch_size=8)
    passes: list[tuple[int, ...]] = []
    run = onnx._session.run

    def recorded(outputs, feeds):
        passes.append(feeds["input_ids"].shape)
        return run(outputs, feeds)

    onnx._session.run = recorded
    together = onnx.encode(TEXTS[:8] + TEXTS[:2])  # the first two twice
    lengths = [len(e.ids) for e in onnx._own_tokenizer().encode_batch(TEXTS[:8])]
    # one pass per length: nothing is padded, and texts of one length go together
    assert sorted(passes) == sorted((lengths.count(n) + (n in lengths[:2]), n) for n in set(lengths))
    unique = [i for i, n in enumerate(lengths) if lengths.count(n) == 1 and i >= 2]
    assert len(unique) >= 3
    alone = np.concatenate([onnx.encode([TEXTS[i]]) for i in unique])
    # int8 activations are quantised per pass: a text whose length no other has gets the vector
    # it gets alone, whatever else the call holds
    assert np.array_equal(together[unique], alone)


def embedder_env(migrated_pg, keys_dir, tmp_path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")}
    env.update(
        {
            "KNOWLEDGE_DATA_DIR": str(tmp_path),
            "KNOWLEDGE_EMBEDDER_PORT": str(free_port()),
            "KNOWLEDGE_DATABASE_URL": migrated_pg.url(user="knowledge_embedder"),
            "KNOWLEDGE_JWKS_PATH": str(keys_dir / "jwks.json"),
            "HF_HUB_CACHE": str(tmp_path / "hub"),
        }
    )
    env.update(extra)
    return env


def test_a_model_that_would_need_a_download_stops_the_process_by_name(migrated_pg, keys_dir, tmp_path):
    env = embedder_env(migrated_pg, keys_dir, tmp_path, KNOWLEDGE_EMBEDDING_MODEL="BAAI/bge-m3", HF_HUB_OFFLINE="0")
    result = subprocess.run(
        [sys.executable, "-m", "knowledge_embedder"], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2, result.stderr
    assert "KNOWLEDGE_EMBEDDING_MODEL" in result.stderr and "bge-m3" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "hub").exists() or not any((tmp_path / "hub").rglob("*.safetensors"))


@pytest.mark.parametrize(
    ("cuda", "mps", "expected"), [(True, True, "cuda"), (False, True, "mps"), (False, False, "cpu")]
)
def test_auto_picks_cuda_then_mps_then_cpu(monkeypatch, cuda, mps, expected):
    import torch
    from knowledge_embedder.adapters.torch_encoder import pick_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
    assert pick_device("auto") == expected
    assert pick_device("cpu") == "cpu"  # configured wins


def test_an_accelerator_that_is_not_there_fails_at_start(monkeypatch):
    import torch
    from knowledge_embedder.adapters.torch_encoder import pick_device
    from knowledge_runtime.settings import SettingsError

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    for configured in ("cuda", "mps"):
        with pytest.raises(SettingsError, match=f"{configured} is not available"):
            pick_device(configured)


@pytest.mark.parametrize("device", ["cuda", "mps", "cpu"])
def test_the_accelerator_cache_is_released_after_each_sub_batch(model_dir, monkeypatch, device):
    import torch

    encoder = TorchEncoder(str(model_dir), model_dir, device="cpu", max_seq_length=128, batch_size=4)
    released = {"cuda": 0, "mps": 0}
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: released.__setitem__("cuda", released["cuda"] + 1))
    monkeypatch.setattr(torch.mps, "empty_cache", lambda: released.__setitem__("mps", released["mps"] + 1))
    encoder.device = device  # the model stays on the CPU; only the release policy is under test
    vectors = encoder.encode(TEXTS)  # 10 texts in passes of 4: three sub-batches
    assert vectors.shape == (10, 384)
    assert released == {"cuda": 3 if device == "cuda" else 0, "mps": 3 if device == "mps" else 0}


def test_auto_on_this_cpu_times_both_backends_once_logs_the_choice_and_reads_it_back(model_dir, tmp_path):
    import structlog
    import torch
    from knowledge_embedder.bootstrap import load_encoder
    from knowledge_embedder.config import EmbedderSettings
    from knowledge_runtime.settings import Env

    if torch.cuda.is_available() or torch.backends.mps.is_available():
        pytest.skip(
            "this machine has an accelerator: auto loads torch there (tests/unit/test_embedder_backend_choice.py)"
        )
    env = {"KNOWLEDGE_EMBEDDING_MODEL": str(model_dir), "KNOWLEDGE_DATA_DIR": str(tmp_path)}
    auto = EmbedderSettings.from_env(Env({**env, "KNOWLEDGE_EMBEDDING_BACKEND": "auto"}))

    def start() -> tuple[object, dict]:
        with structlog.testing.capture_logs() as logs:
            encoder = load_encoder(auto)
        (line,) = [line for line in logs if line["event"] == "embedding_backend_chosen"]
        return encoder, line

    encoder, first = start()
    assert first["cached"] is False and first["backend"] == encoder.backend in ("torch", "onnx-int8")
    assert first["torch_per_s"] > 0 and first["int8_per_s"] > 0 and first["cosine"] >= 0.98
    faster = "onnx-int8" if first["int8_per_s"] > first["torch_per_s"] and first["cosine"] >= 0.99 else "torch"
    assert encoder.backend == faster and encoder.max_seq_length == 256
    cached = json.loads((tmp_path / "embedder" / "backend-choice.json").read_text())
    assert [record["backend"] for record in cached.values()] == [encoder.backend]
    again, second = start()  # a second start reads the choice: no timing, the same rates
    assert second == {**first, "cached": True} and again.backend == encoder.backend
    torch_vectors = TorchEncoder(str(model_dir), model_dir, device="cpu", max_seq_length=1024, batch_size=0).encode(
        TEXTS
    )
    assert (again.encode(TEXTS) * torch_vectors).sum(axis=1).mean() >= 0.98
    with structlog.testing.capture_logs() as logs:
        assert load_encoder(EmbedderSettings.from_env(Env(env))).backend == "torch"  # the service's default
    assert not [line for line in logs if line["event"] == "embedding_backend_chosen"]  # configured: not timed
