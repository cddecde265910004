"""Facts about the configured embedding model, read from its files (no model is loaded).

The schema's vector dimension comes from the model: ``KNOWLEDGE_EMBEDDING_DIMENSION`` when
set, else the sentence-transformers layout of ``KNOWLEDGE_EMBEDDING_MODEL`` (the last Dense
layer's ``out_features``, else the pooling layer's dimension, else ``hidden_size``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from knowledge_runtime.settings import Env, SettingsError


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise SettingsError(f"KNOWLEDGE_EMBEDDING_MODEL: cannot read {path.name} ({error})") from None


def model_dimension(model_dir: Path) -> int:
    if not model_dir.is_dir():
        raise SettingsError(
            f"KNOWLEDGE_EMBEDDING_MODEL: {model_dir} is not a local model directory; "
            "point it at one or set KNOWLEDGE_EMBEDDING_DIMENSION"
        )
    modules_file = model_dir / "modules.json"
    modules = _read_json(modules_file) if modules_file.exists() else []
    for module in reversed(modules):
        kind = module.get("type", "")
        folder = model_dir / module.get("path", "")
        if kind.endswith("Dense"):
            return int(_read_json(folder / "config.json")["out_features"])
        if kind.endswith("Pooling"):
            return int(_read_json(folder / "config.json")["word_embedding_dimension"])
    config = _read_json(model_dir / "config.json")
    if "hidden_size" not in config:
        raise SettingsError(f"KNOWLEDGE_EMBEDDING_MODEL: {model_dir} does not say its dimension")
    return int(config["hidden_size"])


def embedding_dimension(env: Env | None = None) -> int:
    env = env or Env()
    explicit = env.int("EMBEDDING_DIMENSION", 0, minimum=0, maximum=16000)
    if explicit:
        return explicit
    model = env.str("EMBEDDING_MODEL", required=True)
    assert model is not None
    return model_dimension(Path(model).expanduser())
