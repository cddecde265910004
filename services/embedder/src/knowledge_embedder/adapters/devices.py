"""What the machine offers the encoders: the device torch would run on, and whether ONNX Runtime
is installed. Imports torch (not sentence-transformers) only when asked for the device."""

from __future__ import annotations

import importlib.util

from knowledge_runtime.settings import SettingsError


def pick_device(configured: str) -> str:
    """cuda > mps > cpu for ``auto``; a configured device that is not there stops the process."""
    if configured == "cpu":
        return configured
    import torch

    cuda, mps = torch.cuda.is_available(), torch.backends.mps.is_available()
    if configured == "auto":
        return "cuda" if cuda else "mps" if mps else "cpu"
    if (configured == "cuda" and not cuda) or (configured == "mps" and not mps):
        raise SettingsError(f"KNOWLEDGE_EMBEDDING_DEVICE: {configured} is not available on this machine")
    return configured


def onnx_runtime_installed() -> bool:
    return importlib.util.find_spec("onnxruntime") is not None
