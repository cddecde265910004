"""Which encoder backend runs: one pure decision from the setting and what the machine has."""

from __future__ import annotations

BACKENDS = ("auto", "torch", "onnx-int8")


def choose_backend(configured: str, *, device: str, onnx_runtime: bool, onnx_model: bool) -> str:
    """``torch`` or ``onnx-int8`` as configured. ``auto``: torch on an accelerator (cuda, mps),
    where it is the fast one; on a CPU the int8 export (within half a nDCG@10 point of torch on
    the SciFact dev set and faster there: see the embedder's README) when ONNX Runtime is
    installed and the model is one the export supports (``onnx_model``: a tokenizer.json and
    only transformer, pooling and normalisation modules), else torch.

    ``device`` is the device torch would run on (cuda, mps or cpu)."""
    if configured != "auto":
        return configured
    if device == "cpu" and onnx_runtime and onnx_model:
        return "onnx-int8"
    return "torch"
