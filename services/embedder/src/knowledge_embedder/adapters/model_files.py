"""Where the configured model lives on disk and what its files say, without loading it.

Nothing is ever downloaded: a hub name must already be in the local Hugging Face cache.
"""

from __future__ import annotations

import json
from pathlib import Path

from knowledge_runtime.settings import SettingsError

VARIABLE = "KNOWLEDGE_EMBEDDING_MODEL"
# Models whose position ids start after the padding index (RoBERTa family, e.g. bge-m3).
_OFFSET_POSITIONS = ("roberta", "xlm-roberta", "camembert")


def resolve_model_dir(name: str, *, setting: str = VARIABLE) -> Path:
    """A local model directory for ``name``: the path itself, or the offline cache's snapshot."""
    path = Path(name).expanduser()
    if path.is_dir():
        return path.resolve()
    if path.exists() or name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise SettingsError(f"{setting}: {name} is not a model directory")
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(name, local_files_only=True))
    except Exception:  # noqa: BLE001 - any miss (not cached, invalid name, offline) means the same thing here
        raise SettingsError(
            f"{setting}: {name!r} is neither a local model directory nor in the local Hugging Face cache; "
            "models are never downloaded at run time (HF_HUB_OFFLINE=1): put the model on disk and point "
            f"{setting} at it"
        ) from None


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def position_limit(model_dir: Path) -> int | None:
    """The longest input the model's position embeddings allow, if its config says."""
    config = _json(model_dir / "config.json")
    positions = config.get("max_position_embeddings")
    if not isinstance(positions, int):
        return None
    if config.get("model_type") in _OFFSET_POSITIONS:
        positions -= int(config.get("pad_token_id", 1)) + 1
    return positions


def model_max_seq_length(model_dir: Path) -> int | None:
    """The input length the model was trained and configured for (sentence-transformers'
    ``sentence_bert_config.json``), if it says."""
    length = _json(model_dir / "sentence_bert_config.json").get("max_seq_length")
    return length if isinstance(length, int) and length > 0 else None


def window(model_dir: Path, configured: int) -> int:
    """The tokens the model reads at once: the least of ``KNOWLEDGE_MAX_SEQ_LENGTH``, the model's
    own configured length and what its position embeddings allow. A longer text is read in
    windows of this length (the mean of their vectors), never cut."""
    limits = (configured, model_max_seq_length(model_dir), position_limit(model_dir))
    return min(limit for limit in limits if limit is not None)


def model_prompts(model_dir: Path) -> dict[str, str]:
    """The prompts the model was configured with (sentence-transformers'
    ``config_sentence_transformers.json``: e.g. e5's ``{"query": "query: ", "passage": "passage: "}``);
    empty when it names none."""
    prompts = _json(model_dir / "config_sentence_transformers.json").get("prompts")
    if not isinstance(prompts, dict):
        return {}
    return {name: text for name, text in prompts.items() if isinstance(name, str) and isinstance(text, str)}


def pooling_mode(model_dir: Path) -> str:
    """ "mean", "cls" or "lasttoken" from the sentence-transformers pooling module ("mean" if none)."""
    for module in _modules(model_dir):
        if module.get("type", "").endswith("Pooling"):
            config = _json(model_dir / module.get("path", "") / "config.json")
            if config.get("pooling_mode_cls_token"):
                return "cls"
            if config.get("pooling_mode_lasttoken"):
                return "lasttoken"
            if config.get("pooling_mode_mean_tokens", True):
                return "mean"
            raise SettingsError(f"{VARIABLE}: pooling {config} is not supported by the ONNX backend")
    return "mean"


def has_extra_modules(model_dir: Path) -> bool:
    """True when modules beyond transformer, pooling and normalisation (e.g. Dense) follow."""
    plain = ("Transformer", "Pooling", "Normalize")
    return any(not m.get("type", "").endswith(plain) for m in _modules(model_dir))


def onnx_unsupported(model_dir: Path) -> str | None:
    """Why the int8 ONNX export cannot run this model, as the setting's error says it; None when it
    can: it needs the model's tokenizer.json, only transformer, pooling and normalisation modules,
    and a pooling it implements (:func:`pooling_mode`)."""
    if not (model_dir / "tokenizer.json").is_file():
        return "KNOWLEDGE_EMBEDDING_BACKEND: onnx-int8 needs the model's tokenizer.json"
    if has_extra_modules(model_dir):
        return "KNOWLEDGE_EMBEDDING_BACKEND: onnx-int8 supports transformer + pooling models only"
    try:
        pooling_mode(model_dir)
    except SettingsError as error:
        return str(error)
    return None


def _modules(model_dir: Path) -> list[dict]:
    modules = _json(model_dir / "modules.json")
    return modules if isinstance(modules, list) else []
