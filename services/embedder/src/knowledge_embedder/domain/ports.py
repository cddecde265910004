"""What the use cases need from the outside world."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from knowledge_embedder.domain.model import AnchorMatch, AnchorTarget, CostLine, Measured, RerankPair


class Encoder(Protocol):
    """A loaded model. Both methods block: callers run them off the event loop."""

    model_id: str
    backend: str
    device: str
    dimension: int
    max_seq_length: int  # the window: the tokens the model reads at once
    lanes: int  # forward passes it runs at once, each called from its own thread
    batch_size: int  # texts per forward pass
    tokenizer_id: str  # the SHA-256 of tokenizer_json(): names the tokenizer it counts with

    def measure(self, texts: Sequence[str]) -> list[Measured]:
        """Tokens each text costs and, for a text longer than the window, the windows it is read in."""

    def tokenizer_json(self) -> str:
        """The tokenizer it counts and cuts windows with, as the tokenizers library's JSON."""

    def encode(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray:
        """Unit vectors, one float32 row per text (each within the window, its prompt already
        prepended), in order. ``query``: the texts are search queries (a remote server that takes
        an input type is told so; a local model reads the prompt alone)."""


class Reranker(Protocol):
    """A loaded cross-encoder. Both methods block: callers run them off the event loop."""

    model_id: str
    device: str

    def measure(self, pairs: Sequence[RerankPair]) -> list[int]:
        """Tokens each pair costs after truncation."""

    def score(self, pairs: Sequence[RerankPair]) -> np.ndarray:
        """One relevance score per pair, in order (higher is more relevant)."""


class EmbeddingStore(Protocol):
    """Anchors and cost records (role knowledge_embedder); chunk rows are ingest's alone."""

    async def upsert_anchor(
        self, tenant: str, target: AnchorTarget, vector: np.ndarray, content_chars: int, cost: CostLine
    ) -> int: ...

    async def anchor_exists(self, tenant: str, target: AnchorTarget) -> bool: ...

    async def replace_anchor(
        self, tenant: str, target: AnchorTarget, vector: np.ndarray, content_chars: int, cost: CostLine
    ) -> int | None:
        """Update an existing anchor; None (and nothing written) when there is none."""

    async def nearest_anchors(
        self, tenant: str, vector: np.ndarray, entity_type: str, top_k: int, cost: CostLine
    ) -> list[AnchorMatch]: ...

    async def record_cost(self, tenant: str, cost: CostLine) -> None: ...
