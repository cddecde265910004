"""The embedder's settings, read once from ``KNOWLEDGE_*`` at start.

The model always comes from configuration (a local path or a name that resolves offline),
never from a literal in the code.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from knowledge_runtime.settings import CommonSettings, Env

from knowledge_embedder.domain.backend import BACKENDS

CPU_BULK_BATCH_TOKENS = 512


def _display_id(model: str) -> str:
    """A hub-style name as given; for a local path, its last two folders (no server layout leaks)."""
    path = Path(model)
    if not path.is_absolute() and not model.startswith((".", "~")):
        return model
    return "/".join(path.expanduser().parts[-2:])


@dataclass(frozen=True, slots=True)
class EmbedderSettings:
    common: CommonSettings
    model: str
    model_id: str  # what Info, cost records and answers name: never a server path
    device: str  # "auto" picks cuda > mps > cpu
    backend: str  # "auto": torch on cuda or mps, else onnx-int8 when ONNX Runtime is installed
    max_seq_length: int
    max_batch_tokens: int
    bulk_batch_tokens: int  # the cap of a batch of passages (what a query may wait behind); 0 = by device
    interactive_burst: int  # query batches in a row before waiting passages get a batch
    max_queue: int
    batch_size: int  # inputs per forward pass; 0 = by device (cuda 32, mps 8, cpu 16; onnx-int8 8)
    price_per_1k_tokens: float
    currency: str
    database_pool_size: int
    rerank_model: str | None = None  # a local cross-encoder directory; None: Rerank is refused
    rerank_model_id: str = ""
    rerank_max_length: int = 512
    rerank_price_per_1k_tokens: float = 0.0
    inference_lanes: int = 0  # ONNX forward passes at once; 0 = one per usable core (torch: always one)

    def bulk_batch_tokens_on(self, device: str) -> int:
        """The configured cap, else by device: on a CPU (or mps) a forward pass costs about the same
        per token at any batch size, so a small batch (512 tokens) costs ingestion little and keeps a
        query's wait short; on cuda a large batch costs little more than a small one (the full
        ``max_batch_tokens``)."""
        by_device = self.max_batch_tokens if device.startswith("cuda") else CPU_BULK_BATCH_TOKENS
        chosen = self.bulk_batch_tokens or by_device
        return min(chosen, self.max_batch_tokens)

    @classmethod
    def from_env(cls, env: Env | None = None) -> EmbedderSettings:
        env = env or Env()
        model = env.str("EMBEDDING_MODEL", required=True)
        assert model is not None
        rerank_model = env.str("RERANK_MODEL") or None
        return cls(
            common=CommonSettings.from_env("embedder", env),
            model=model,
            model_id=env.str("EMBEDDING_MODEL_ID") or _display_id(model),
            device=env.choice("EMBEDDING_DEVICE", "auto", ("auto", "cuda", "mps", "cpu")),
            backend=env.choice("EMBEDDING_BACKEND", "torch", BACKENDS),
            max_seq_length=env.int("MAX_SEQ_LENGTH", 1024, minimum=16),
            max_batch_tokens=env.int("MAX_BATCH_TOKENS", 16384, minimum=64),
            bulk_batch_tokens=env.int("BULK_BATCH_TOKENS", 0, minimum=0),
            interactive_burst=env.int("INTERACTIVE_BURST", 1, minimum=1),
            max_queue=env.int("MAX_QUEUE", 4096, minimum=1),
            batch_size=env.int("EMBEDDING_BATCH_SIZE", 0, minimum=0, maximum=4096),
            price_per_1k_tokens=env.float("EMBEDDING_PRICE_PER_1K", 0.0, minimum=0.0),
            currency=env.str("EMBEDDING_CURRENCY", "USD") or "USD",
            database_pool_size=env.int("EMBEDDER_DATABASE_POOL_SIZE", 10, minimum=1, maximum=200),
            rerank_model=rerank_model,
            rerank_model_id=(env.str("RERANK_MODEL_ID") or _display_id(rerank_model)) if rerank_model else "",
            rerank_max_length=env.int("RERANK_MAX_LENGTH", 512, minimum=16),
            rerank_price_per_1k_tokens=env.float("RERANK_PRICE_PER_1K", 0.0, minimum=0.0),
            inference_lanes=env.int("INFERENCE_LANES", 0, minimum=0, maximum=64),
        )
