"""The ONNX Runtime encoder for CPU-only deployments: the int8 export, the model's tokenizer,
its pooling, unit-length vectors. No torch at inference time."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort
from knowledge_runtime.process import usable_cores
from knowledge_runtime.settings import SettingsError
from tokenizers import Encoding, Tokenizer

from knowledge_embedder.adapters.model_files import onnx_unsupported, pooling_mode, window
from knowledge_embedder.adapters.onnx_export import ensure_int8_model
from knowledge_embedder.adapters.tokens import TokenMeasurer, in_length_order
from knowledge_embedder.domain.model import Measured

# int8 kernels on a CPU do not gain from big passes: in bench/embedder.py's runs, passes of 8
# were the fastest or close to it. The queue still takes whole token budgets at a time.
DEFAULT_BATCH_SIZE = 8
# Nor do they gain enough to pay for padding: a pass holds texts of one length in tokens only.
# 300 SciFact abstracts' 827 chunks (mixed lengths) took 6.2 s so, 6.7 s with padding bounded to
# a tenth of a pass's tokens, 7.5 s to a quarter, and 10.5 s in passes of 8 in length order.
PADDING_SLACK = 0.0


class OnnxEncoder:
    backend = "onnx-int8"
    device = "cpu"

    def __init__(
        self,
        model_id: str,
        model_dir: Path,
        *,
        cache_root: Path,
        max_seq_length: int,
        batch_size: int,
        lanes: int = 1,
    ) -> None:
        """``lanes``: forward passes run at once, each from its own thread, on the usable cores
        shared out between them (one lane: one pass on every core). ONNX Runtime's ``run`` may be
        called from several threads at once; each lane tokenises with a tokenizer of its own."""
        unsupported = onnx_unsupported(model_dir)
        if unsupported is not None:
            raise SettingsError(unsupported)
        tokenizer_file = model_dir / "tokenizer.json"
        self.model_id = model_id
        self.max_seq_length = window(model_dir, max_seq_length)  # the window: longer texts come in windows
        self.batch_size = batch_size or DEFAULT_BATCH_SIZE
        self._pooling = pooling_mode(model_dir)
        options = ort.SessionOptions()
        self.lanes = max(1, lanes)
        options.intra_op_num_threads = max(1, usable_cores() // self.lanes)
        # ONNX Runtime's threads spin after each run waiting for the next; between a service's
        # batches that burns the cores PostgreSQL and ingest need. They sleep instead.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = ort.InferenceSession(
            str(ensure_int8_model(model_dir, cache_root)), options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self._tokenizer.enable_truncation(max_length=self.max_seq_length)
        self._pad_id = int((self._tokenizer.padding or {}).get("pad_id", 0))
        self._tokenizer.no_padding()  # each pass is padded to its own longest, below
        self._measurer = TokenMeasurer(self._tokenizer, self.max_seq_length)
        self.tokenizer_id = self._measurer.counter.identity
        # A fast tokenizer used by two threads at once fails ("Already borrowed"): one per thread.
        self._tokenizers = threading.local()
        self.dimension = int(self.encode(["dimension probe"]).shape[1])

    def measure(self, texts: Sequence[str]) -> list[Measured]:
        return self._measurer.measure(texts)

    def tokenizer_json(self) -> str:
        return self._measurer.counter.json

    def encode(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray:
        """Unit vectors, one row per text: every text tokenised once, then passes of texts of
        about the same length in tokens."""
        encodings = self._own_tokenizer().encode_batch(list(texts))
        return in_length_order(
            [len(e.ids) for e in encodings],
            self.batch_size,
            lambda group: self._forward([encodings[i] for i in group]),
            PADDING_SLACK,
        )

    def _own_tokenizer(self) -> Tokenizer:
        tokenizer = getattr(self._tokenizers, "tokenizer", None)
        if tokenizer is None:  # a copy with the same truncation
            tokenizer = self._tokenizers.tokenizer = Tokenizer.from_str(self._tokenizer.to_str())
        return tokenizer

    def _forward(self, encodings: list[Encoding]) -> np.ndarray:
        longest = max(len(e.ids) for e in encodings)
        ids = np.full((len(encodings), longest), self._pad_id, dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for row, encoding in enumerate(encodings):
            length = len(encoding.ids)
            ids[row, :length] = encoding.ids
            mask[row, :length] = 1
            types[row, :length] = encoding.type_ids
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        hidden = self._session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})[0]
        if self._pooling == "cls":
            pooled = hidden[:, 0]
        elif self._pooling == "lasttoken":
            pooled = hidden[np.arange(len(encodings)), mask.sum(axis=1) - 1]
        else:
            weights = mask[..., None].astype(hidden.dtype)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
