"""What the machine offers the encoders: the device torch would run on. Imports torch (not
sentence-transformers) only when asked for a device other than cpu (ONNX Runtime, the int8
backend's, is a dependency of the embedder: always installed)."""

from __future__ import annotations

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
