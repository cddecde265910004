"""The embedder's backend choice: ``auto`` runs torch on an accelerator and, on a CPU, the faster of
torch and the int8 export as timed there (fake timings here), cached per model and machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import structlog
from knowledge_embedder import bootstrap
from knowledge_embedder.adapters import backend_timing
from knowledge_embedder.adapters.model_files import onnx_unsupported
from knowledge_embedder.config import EmbedderSettings
from knowledge_embedder.domain.backend import MIN_AGREEMENT, Choice, Timing, auto_candidates, faster
from knowledge_runtime.settings import Env, SettingsError


@pytest.mark.parametrize(
    ("device", "onnx_model", "expected"),
    [
        ("cuda", True, ("torch",)),
        ("mps", True, ("torch",)),
        ("cpu", True, ("torch", "onnx-int8")),  # timed against each other
        ("cpu", False, ("torch",)),  # a model the export does not support (no tokenizer.json, a Dense module)
    ],
)
def test_auto_times_both_backends_only_on_a_cpu_with_a_model_the_export_supports(device, onnx_model, expected):
    asked: list[str] = []

    def machine() -> str:
        asked.append(device)
        return device

    assert auto_candidates(onnx_model=onnx_model, device=machine) == expected
    assert len(asked) == int(onnx_model)  # the device (torch's import) only for a model the export supports


@pytest.mark.parametrize(
    ("torch_per_s", "int8_per_s", "cosine", "expected"),
    [
        (10.0, 18.0, 0.995, "onnx-int8"),  # faster, and agrees
        (18.0, 10.0, 0.995, "torch"),  # torch faster (as it can be on a CPU with wide vector units)
        (10.0, 30.0, 0.985, "torch"),  # faster but disagrees: quantisation cost this model too much
        (10.0, 10.0, 0.999, "torch"),  # a tie keeps torch
        (10.0, 10.5, 0.99, "onnx-int8"),  # the bound itself agrees
    ],
)
def test_the_faster_backend_wins_provided_the_two_agree(torch_per_s, int8_per_s, cosine, expected):
    timing = Timing(torch_per_s=torch_per_s, int8_per_s=int8_per_s, cosine=cosine)
    assert faster(timing) == Choice(expected, timing)
    assert MIN_AGREEMENT == 0.99


class Timings:
    """The timing ``backend_for`` asks for: fixed rates, and how often it was asked."""

    def __init__(self, torch_per_s: float = 10.0, int8_per_s: float = 18.0, cosine: float = 0.995) -> None:
        self.timing = Timing(torch_per_s, int8_per_s, cosine)
        self.calls = 0

    def __call__(self) -> Timing:
        self.calls += 1
        return self.timing


def chosen_backend(settings: EmbedderSettings, folder: Path, timings: Timings) -> tuple[str, dict]:
    """The backend ``auto`` loads, and its one ``embedding_backend_chosen`` log line (or {})."""
    with structlog.testing.capture_logs() as logs:
        backend = bootstrap.backend_for(settings, folder, timings)
    lines = [line for line in logs if line["event"] == "embedding_backend_chosen"]
    assert len(lines) <= 1
    return backend, lines[0] if lines else {}


def test_on_a_cpu_auto_takes_the_faster_and_logs_both_rates(machine, tmp_path):
    plain = model(tmp_path / "plain")
    backend, line = chosen_backend(settings("auto", data=tmp_path / "data"), plain, Timings(10.0, 18.0, 0.995))
    assert backend == "onnx-int8"
    assert line == {
        "event": "embedding_backend_chosen",
        "log_level": "info",
        "backend": "onnx-int8",
        "torch_per_s": 10.0,
        "int8_per_s": 18.0,
        "cosine": 0.995,
        "cached": False,
    }
    slower = Timings(18.0, 10.0, 0.995)
    assert chosen_backend(settings("auto", data=tmp_path / "other"), plain, slower)[0] == "torch"
    disagreeing = Timings(10.0, 30.0, 0.98)
    assert chosen_backend(settings("auto", data=tmp_path / "third"), plain, disagreeing)[0] == "torch"


def test_a_cached_choice_skips_the_timing_and_says_so(machine, tmp_path):
    plain, data, timings = model(tmp_path / "plain"), tmp_path / "data", Timings()
    first = chosen_backend(settings("auto", data=data), plain, timings)
    second = chosen_backend(settings("auto", data=data), plain, timings)
    assert timings.calls == 1
    assert first[0] == second[0] == "onnx-int8" and (first[1]["cached"], second[1]["cached"]) == (False, True)
    assert second[1]["torch_per_s"] == 10.0 and second[1]["int8_per_s"] == 18.0  # the rates it was chosen by
    records = json.loads((data / "embedder" / "backend-choice.json").read_text())
    (record,) = records.values()
    assert record["backend"] == "onnx-int8" and record["fingerprint"]["model"] == "models/m"
    assert {"model_files", "window", "cpu", "cpu_flags", "cores", "libraries", "lanes", "batch_size"} <= set(
        record["fingerprint"]
    )


def test_a_changed_fingerprint_times_again(machine, tmp_path, monkeypatch):
    plain, data, timings = model(tmp_path / "plain"), tmp_path / "data", Timings()
    chosen_backend(settings("auto", data=data), plain, timings)
    (plain / "config.json").write_text('{"max_position_embeddings": 512}')  # new model files
    assert chosen_backend(settings("auto", data=data), plain, timings)[1]["cached"] is False
    monkeypatch.setattr(backend_timing, "_cpu", lambda: {"cpu": "another CPU", "cpu_flags": "f", "machine": "x"})
    assert chosen_backend(settings("auto", data=data), plain, timings)[1]["cached"] is False
    assert chosen_backend(settings("auto", data=data, BATCH_SIZE="4"), plain, timings)[1]["cached"] is False
    assert timings.calls == 4
    assert len(json.loads((data / "embedder" / "backend-choice.json").read_text())) == 4  # each kept
    assert chosen_backend(settings("auto", data=data), plain, timings)[1]["cached"] is True


def test_an_unreadable_cache_is_timed_again_and_rewritten(machine, tmp_path):
    plain, data, timings = model(tmp_path / "plain"), tmp_path / "data", Timings()
    (data / "embedder").mkdir(parents=True)
    (data / "embedder" / "backend-choice.json").write_text("not json")
    assert chosen_backend(settings("auto", data=data), plain, timings)[0] == "onnx-int8" and timings.calls == 1
    assert chosen_backend(settings("auto", data=data), plain, timings)[1]["cached"] is True


@pytest.mark.parametrize("configured", ["torch", "onnx-int8"])
@pytest.mark.parametrize("device", ["cuda", "mps", "cpu"])
def test_a_configured_backend_wins_on_every_device_without_timing(configured, device, machine, tmp_path):
    machine["device"] = device
    timings = Timings()
    unsupported = model(tmp_path / "dense", modules=("Transformer", "Pooling", "Dense"))
    for folder in (model(tmp_path / "plain"), unsupported):
        assert chosen_backend(settings(configured, data=tmp_path / "data"), folder, timings) == (configured, {})
    assert machine["asked"] == [] and timings.calls == 0
    assert not (tmp_path / "data" / "embedder").exists()


def test_the_setting_takes_auto_and_stays_torch_by_default():
    def read(**values: str) -> str:
        env = {"KNOWLEDGE_EMBEDDING_MODEL": "/models/m", **{f"KNOWLEDGE_{k}": v for k, v in values.items()}}
        return EmbedderSettings.from_env(Env(env)).backend

    assert read() == "torch"
    assert read(EMBEDDING_BACKEND="auto") == "auto"
    with pytest.raises(SettingsError, match="KNOWLEDGE_EMBEDDING_BACKEND"):
        read(EMBEDDING_BACKEND="onnx")


def settings(backend: str, device: str = "auto", data: Path | None = None, **extra: str) -> EmbedderSettings:
    return EmbedderSettings.from_env(
        Env(
            {
                "KNOWLEDGE_EMBEDDING_MODEL": "/models/m",
                "KNOWLEDGE_EMBEDDING_BACKEND": backend,
                "KNOWLEDGE_EMBEDDING_DEVICE": device,
                **({"KNOWLEDGE_DATA_DIR": str(data)} if data else {}),
                **{f"KNOWLEDGE_EMBEDDING_{k}": v for k, v in extra.items()},
            }
        )
    )


def model(
    folder: Path,
    *,
    tokenizer: bool = True,
    modules: tuple[str, ...] = ("Transformer", "Pooling"),
    pooling: dict | None = None,
) -> Path:
    folder.mkdir()
    if tokenizer:
        (folder / "tokenizer.json").write_text("{}")
    listed = [{"type": f"sentence_transformers.models.{m}", "path": f"{n}_{m}"} for n, m in enumerate(modules)]
    (folder / "modules.json").write_text(json.dumps(listed))
    if pooling is not None:
        (folder / f"{modules.index('Pooling')}_Pooling").mkdir()
        (folder / f"{modules.index('Pooling')}_Pooling" / "config.json").write_text(json.dumps(pooling))
    return folder


@pytest.fixture
def machine(monkeypatch):
    """What the bootstrap is told the machine has (torch's device), and what it asked."""
    seen: dict[str, object] = {"device": "cpu", "asked": []}

    def pick_device(configured: str) -> str:
        seen["asked"].append(configured)  # type: ignore[attr-defined]
        return str(seen["device"]) if configured == "auto" else configured

    monkeypatch.setattr(bootstrap, "pick_device", pick_device)
    return seen


def test_auto_asks_the_machine_and_times_only_on_a_cpu(machine, tmp_path):
    plain, timings = model(tmp_path / "plain"), Timings()
    machine["device"] = "cuda"
    assert chosen_backend(settings("auto", data=tmp_path / "data"), plain, timings) == ("torch", {})
    machine["device"] = "mps"
    assert chosen_backend(settings("auto", data=tmp_path / "data"), plain, timings) == ("torch", {})
    assert timings.calls == 0 and machine["asked"] == ["auto", "auto"]
    machine["device"] = "cpu"
    assert chosen_backend(settings("auto", device="cpu", data=tmp_path / "data"), plain, timings)[0] == "onnx-int8"
    assert timings.calls == 1 and machine["asked"] == ["auto", "auto", "cpu"]


def test_auto_keeps_torch_for_a_model_the_export_does_not_support(machine, tmp_path):
    timings, data = Timings(), tmp_path / "data"
    no_tokenizer = model(tmp_path / "no-tokenizer", tokenizer=False)
    assert chosen_backend(settings("auto", data=data), no_tokenizer, timings)[0] == "torch"
    dense = model(tmp_path / "dense", modules=("Transformer", "Pooling", "Dense", "Normalize"))
    assert chosen_backend(settings("auto", data=data), dense, timings)[0] == "torch"
    assert machine["asked"] == [] and timings.calls == 0  # torch either way: neither device nor timing asked
    normalised = model(tmp_path / "normalised", modules=("Transformer", "Pooling", "Normalize"))
    assert chosen_backend(settings("auto", data=data), normalised, timings)[0] == "onnx-int8"
    # A pooling the export does not implement (max): torch, not an OnnxEncoder that refuses to start.
    max_pooled = model(tmp_path / "max", pooling={"pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": True})
    assert onnx_unsupported(max_pooled) is not None and "pooling" in str(onnx_unsupported(max_pooled))
    assert chosen_backend(settings("auto", data=data), max_pooled, timings)[0] == "torch"
    cls_pooled = model(tmp_path / "cls", pooling={"pooling_mode_cls_token": True})
    assert chosen_backend(settings("auto", data=data), cls_pooled, timings)[0] == "onnx-int8"


def test_knowledge_up_starts_the_embedder_on_auto_unless_told_otherwise(tmp_path, monkeypatch):
    from knowledge_cli.stack import Stack
    from knowledge_cli.stack_settings import StackSettings
    from knowledge_runtime.devkeys import KEY_ID_FILE

    (tmp_path / KEY_ID_FILE).write_text("kid\n")
    stack = Stack(
        StackSettings(
            data_dir=tmp_path,
            host="127.0.0.1",
            http_port=1,
            admin_port=0,
            ports={},
            database_url="unused",
            embedding_model="unused",
            embedding_model_id="",
            issuer="i",
            audience="a",
            max_upload_bytes=1,
        )
    )
    monkeypatch.delenv("KNOWLEDGE_EMBEDDING_BACKEND", raising=False)
    assert stack._service_env(tmp_path / "jwks.json", "postgresql://x")["KNOWLEDGE_EMBEDDING_BACKEND"] == "auto"
    monkeypatch.setenv("KNOWLEDGE_EMBEDDING_BACKEND", "torch")
    assert stack._service_env(tmp_path / "jwks.json", "postgresql://x")["KNOWLEDGE_EMBEDDING_BACKEND"] == "torch"
