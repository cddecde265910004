"""The cross-encoder reranker (sentence-transformers ``CrossEncoder``), on the embedding model's device.

Loaded only when ``KNOWLEDGE_RERANK_MODEL`` names a local model directory (a bge-reranker or an
ms-marco cross-encoder an operator has put on the node); nothing is downloaded. Scores are the
model's raw output for each (query, passage) pair, higher is more relevant.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from sentence_transformers import CrossEncoder
from transformers import AutoTokenizer

from knowledge_embedder.adapters.devices import pick_device
from knowledge_embedder.adapters.torch_encoder import DEFAULT_BATCH_SIZES
from knowledge_embedder.domain.model import RerankPair


class TorchReranker:
    backend = "torch"

    def __init__(self, model_id: str, model_dir: Path, *, device: str, max_length: int, batch_size: int) -> None:
        self.model_id = model_id
        self.device = pick_device(device)  # the embedding model's order: cuda > mps > cpu unless configured
        self._model = CrossEncoder(str(model_dir), device=self.device, local_files_only=True, max_length=max_length)
        self.max_length = int(self._model.max_seq_length or max_length)
        self.batch_size = batch_size or DEFAULT_BATCH_SIZES[self.device.split(":")[0]]
        # A tokenizer of its own: measure() runs on the tokenising thread while score() runs on the
        # inference thread, and a fast tokenizer used by two threads at once fails ("Already borrowed").
        self._tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)

    def measure(self, pairs: Sequence[RerankPair]) -> list[int]:
        """Tokens each pair costs, after truncation to ``max_length``."""
        encoded = self._tokenizer(
            [p.query for p in pairs], [p.passage for p in pairs], truncation=True, max_length=self.max_length
        )
        return [len(ids) for ids in encoded["input_ids"]]

    def score(self, pairs: Sequence[RerankPair]) -> np.ndarray:
        with torch.inference_mode():
            scores = self._model.predict(
                [(p.query, p.passage) for p in pairs],
                batch_size=self.batch_size,
                show_progress_bar=False,
                convert_to_numpy=True,
            )
        if self.device.startswith("cuda"):
            torch.cuda.empty_cache()
        elif self.device == "mps":
            torch.mps.empty_cache()
        return np.asarray(scores, dtype=np.float32).reshape(len(pairs), -1)[:, 0]
