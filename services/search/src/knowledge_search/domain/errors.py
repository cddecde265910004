"""Search's domain errors; each declares its status code through its runtime base class."""

from __future__ import annotations

from knowledge_runtime.errors import FailedPrecondition, InvalidField, NotFound, Unavailable


class InvalidSearch(InvalidField):
    reason = "SEARCH_INVALID"

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(field, message)


class CorpusNotFound(NotFound):
    """Also what another tenant's corpus answers."""

    reason = "CORPUS_NOT_FOUND"

    def __init__(self) -> None:
        super().__init__("corpus not found")


class DocumentNotFound(NotFound):
    """Also what another tenant's document answers."""

    reason = "DOCUMENT_NOT_FOUND"

    def __init__(self) -> None:
        super().__init__("document not found")


class EmbedderUnavailable(Unavailable):
    reason = "EMBEDDER_UNAVAILABLE"

    def __init__(self) -> None:
        super().__init__("the embedder is unavailable")


class LlmUnavailable(Unavailable):
    reason = "LLM_UNAVAILABLE"

    def __init__(self, why: str) -> None:
        super().__init__(f"the language model is unavailable ({why})")


class RerankUnavailable(FailedPrecondition):
    """rerank: true while the embedder has no reranking model: refused, never silently ignored."""

    reason = "RERANK_UNAVAILABLE"

    def __init__(self) -> None:
        super().__init__(
            "reranking is not available: no reranking model is configured on the embedder "
            "(KNOWLEDGE_RERANK_MODEL); search without rerank"
        )
