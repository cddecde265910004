"""The embedder's backend choice: ``auto`` runs torch on an accelerator and the int8 export on a CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from knowledge_embedder import bootstrap
from knowledge_embedder.adapters.model_files import onnx_unsupported
from knowledge_embedder.config import EmbedderSettings
from knowledge_embedder.domain.backend import choose_backend
from knowledge_runtime.settings import Env, SettingsError


@pytest.mark.parametrize(
    ("device", "onnx_model", "expected"),
    [
        ("cuda", True, "torch"),
        ("mps", True, "torch"),
        ("cpu", True, "onnx-int8"),
        ("cpu", False, "torch"),  # a model the export does not support (no tokenizer.json, a Dense module)
    ],
)
def test_auto_is_torch_on_an_accelerator_and_int8_on_a_cpu_that_can_run_it(device, onnx_model, expected):
    asked: list[str] = []

    def machine() -> str:
        asked.append(device)
        return device

    assert choose_backend(onnx_model=onnx_model, device=machine) == expected
    assert len(asked) == int(onnx_model)  # the device (torch's import) only for a model the export supports


@pytest.mark.parametrize("configured", ["torch", "onnx-int8"])
@pytest.mark.parametrize("device", ["cuda", "mps", "cpu"])
def test_a_configured_backend_wins_on_every_device(configured, device, machine, tmp_path):
    machine["device"] = device
    unsupported = model(tmp_path / "dense", modules=("Transformer", "Pooling", "Dense"))
    for folder in (model(tmp_path / "plain"), unsupported):
        assert bootstrap.backend_for(settings(configured), folder) == configured
    assert machine["asked"] == []


def test_the_setting_takes_auto_and_stays_torch_by_default():
    def read(**values: str) -> str:
        env = {"KNOWLEDGE_EMBEDDING_MODEL": "/models/m", **{f"KNOWLEDGE_{k}": v for k, v in values.items()}}
        return EmbedderSettings.from_env(Env(env)).backend

    assert read() == "torch"
    assert read(EMBEDDING_BACKEND="auto") == "auto"
    with pytest.raises(SettingsError, match="KNOWLEDGE_EMBEDDING_BACKEND"):
        read(EMBEDDING_BACKEND="onnx")


def settings(backend: str, device: str = "auto") -> EmbedderSettings:
    return EmbedderSettings.from_env(
        Env(
            {
                "KNOWLEDGE_EMBEDDING_MODEL": "/models/m",
                "KNOWLEDGE_EMBEDDING_BACKEND": backend,
                "KNOWLEDGE_EMBEDDING_DEVICE": device,
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


def test_the_bootstrap_asks_the_machine_only_for_auto(machine, tmp_path):
    plain = model(tmp_path / "plain")
    assert bootstrap.backend_for(settings("auto"), plain) == "onnx-int8"
    machine["device"] = "cuda"
    assert bootstrap.backend_for(settings("auto"), plain) == "torch"
    assert machine["asked"] == ["auto", "auto"]
    machine["device"] = "cpu"
    assert bootstrap.backend_for(settings("auto", device="cpu"), plain) == "onnx-int8"
    assert bootstrap.backend_for(settings("torch"), plain) == "torch"
    assert bootstrap.backend_for(settings("onnx-int8"), plain) == "onnx-int8"
    assert machine["asked"] == ["auto", "auto", "cpu"]  # a configured backend asks nothing


def test_auto_keeps_torch_for_a_model_the_export_does_not_support(machine, tmp_path):
    assert bootstrap.backend_for(settings("auto"), model(tmp_path / "no-tokenizer", tokenizer=False)) == "torch"
    dense = model(tmp_path / "dense", modules=("Transformer", "Pooling", "Dense", "Normalize"))
    assert bootstrap.backend_for(settings("auto"), dense) == "torch"
    assert machine["asked"] == []  # torch either way: the device (torch's import) is not asked for
    normalised = model(tmp_path / "normalised", modules=("Transformer", "Pooling", "Normalize"))
    assert bootstrap.backend_for(settings("auto"), normalised) == "onnx-int8"
    # A pooling the export does not implement (max): torch, not an OnnxEncoder that refuses to start.
    max_pooled = model(tmp_path / "max", pooling={"pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": True})
    assert onnx_unsupported(max_pooled) is not None and "pooling" in str(onnx_unsupported(max_pooled))
    assert bootstrap.backend_for(settings("auto"), max_pooled) == "torch"
    cls_pooled = model(tmp_path / "cls", pooling={"pooling_mode_cls_token": True})
    assert bootstrap.backend_for(settings("auto"), cls_pooled) == "onnx-int8"


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
