"""Search's domain errors; each declares its status code through its runtime base class."""

from __future__ import annotations

from knowledge_runtime.errors import CorpusNotFound, DocumentNotFound, InvalidField, NotFound
from knowledge_runtime.llm import LlmUnavailable  # the runtime chat client's one error
from knowledge_runtime.refusals import Refusal, Refused

__all__ = [
    "CorpusNotFound",
    "DocumentNotFound",
    "EmbedderUnavailable",
    "InvalidSearch",
    "LlmUnavailable",
    "RerankUnavailable",
]


class InvalidSearch(InvalidField):
    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(field, message)


class EmbedderUnavailable(Refused):
    """The embedder cannot embed the query (down, stopping, unreachable): no search that needs
    the vector channel can be answered. RUNTIME_UNAVAILABLE (waiting helps)."""

    def __init__(self) -> None:
        super().__init__(Refusal.RUNTIME_UNAVAILABLE, "the embedder is unavailable", metadata={"runtime": "embedder"})


class RerankUnavailable(Refused):
    """rerank: true while the embedder has no reranking model: refused, never silently ignored.
    RUNTIME_UNAVAILABLE; the message says what to configure."""

    def __init__(self) -> None:
        super().__init__(
            Refusal.RUNTIME_UNAVAILABLE,
            "reranking is not available: no reranking model is configured on the embedder "
            "(KNOWLEDGE_RERANK_MODEL); search without rerank",
            metadata={"runtime": "reranker"},
        )


class ModelChangeNotFound(NotFound):
    """Candidate vectors asked for with no model change open."""

    reason = "MODEL_CHANGE_NOT_FOUND"

    def __init__(self) -> None:
        super().__init__("no model change is open: there are no candidate vectors to read")
