"""The sentence-transformers (PyTorch) encoder: device cuda > mps > cpu unless configured.

The only module of the project that imports sentence_transformers at run time, and with
``devices`` (which asks torch for the device) the only one that imports torch (the ONNX export
borrows transformers + torch once, to build its cache).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

from knowledge_embedder.adapters.devices import pick_device
from knowledge_embedder.adapters.model_files import window
from knowledge_embedder.adapters.tokens import TokenMeasurer, in_length_order
from knowledge_embedder.domain.model import Measured

DEFAULT_BATCH_SIZES = {"cuda": 32, "mps": 8, "cpu": 16}
# On a CPU a pass is padded at most a quarter over its texts' tokens: each pass costs torch more
# than the int8 encoder, so it is not worth one pass per length. SciFact chunks in the embedder's
# passes of 16: 19 s so, 20 s with no padding, 23 s in passes of 16 in length order. An
# accelerator's passes stay full (padding costs it little; unmeasured).
CPU_PADDING_SLACK = 0.25


class TorchEncoder:
    backend = "torch"
    lanes = 1  # one forward pass at a time: torch spreads each over the cores (or the accelerator) itself

    def __init__(self, model_id: str, model_dir: Path, *, device: str, max_seq_length: int, batch_size: int) -> None:
        self.model_id = model_id
        self.device = pick_device(device)
        self._model = SentenceTransformer(str(model_dir), device=self.device, local_files_only=True)
        self.max_seq_length = window(model_dir, max_seq_length)  # the window: longer texts come in windows
        self._model.max_seq_length = self.max_seq_length
        self.dimension = int(self._model.get_embedding_dimension() or 0)
        self.batch_size = batch_size or DEFAULT_BATCH_SIZES[self.device.split(":")[0]]
        self._measurer = TokenMeasurer(self._model.tokenizer.backend_tokenizer, self.max_seq_length)
        self.tokenizer_id = self._measurer.counter.identity

    def measure(self, texts: Sequence[str]) -> list[Measured]:
        return self._measurer.measure(texts)

    def tokenizer_json(self) -> str:
        return self._measurer.counter.json

    def encode(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray:
        """Unit vectors, one row per text, in forward passes of up to ``batch_size`` texts of
        similar length in tokens."""
        if self.device == "cpu":
            lengths, slack = self._measurer.counter.sizes(texts), CPU_PADDING_SLACK
        else:  # full passes in length order: characters do, with no tokenising pass before it
            lengths, slack = [len(text) for text in texts], None
        with torch.inference_mode():
            vectors = in_length_order(
                lengths, self.batch_size, lambda group: self._forward([texts[i] for i in group]), slack
            )
        return vectors.astype(np.float32, copy=False)

    def _forward(self, texts: list[str]) -> np.ndarray:
        vectors = self._model.encode(
            texts, batch_size=len(texts), normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        self._release_cache()  # after each sub-batch, so a long batch cannot hoard accelerator memory
        return vectors

    def _release_cache(self) -> None:
        if self.device.startswith("cuda"):
            torch.cuda.empty_cache()
        elif self.device == "mps":
            torch.mps.empty_cache()
