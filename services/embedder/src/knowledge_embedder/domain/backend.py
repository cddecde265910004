"""Which encoder backend ``auto`` runs: one pure decision from the model and the machine."""

from __future__ import annotations

from collections.abc import Callable

BACKENDS = ("auto", "torch", "onnx-int8")


def choose_backend(*, onnx_model: bool, device: Callable[[], str]) -> str:
    """``auto``'s backend (a configured one is used as it is): on a CPU the int8 export (about as
    accurate as torch on the SciFact dev set and faster there: see the embedder's README) when the
    model is one the export supports (``onnx_model``: a tokenizer.json, only transformer, pooling
    and normalisation modules, a pooling it implements); torch on an accelerator (cuda, mps), where
    it is the fast one, and for any other model.

    ``device`` gives the device torch would run on (cuda, mps or cpu); it is asked only for a
    model the export supports, since asking may import torch."""
    if onnx_model and device() == "cpu":
        return "onnx-int8"
    return "torch"
