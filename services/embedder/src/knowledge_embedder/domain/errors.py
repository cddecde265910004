"""The embedder's domain errors; each declares its status code through its runtime base class."""

from __future__ import annotations

from knowledge_runtime.errors import FailedPrecondition, InvalidField, NotFound, ResourceExhausted, Unavailable
from knowledge_runtime.refusals import EMBEDDING_SERVER, Refusal, Refused


class InvalidInput(InvalidField):
    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(field, message)


class QueueFull(ResourceExhausted):
    """Past KNOWLEDGE_MAX_QUEUE waiting inputs: refuse at once rather than queue without bound."""

    reason = "EMBEDDER_OVERLOADED"

    def __init__(self, waiting: int, limit: int) -> None:
        super().__init__(
            "the embedder queue is full; retry later", metadata={"waiting": str(waiting), "limit": str(limit)}
        )


class EmbedderStopping(Unavailable):
    reason = "EMBEDDER_STOPPING"

    def __init__(self) -> None:
        super().__init__("the embedder is shutting down; retry on another replica")


class ChunkIndexingMoved(InvalidField):
    """Index kind CHUNK: ingest is the only writer of chunk rows."""

    reason = "CHUNK_INDEXING_MOVED"

    def __init__(self) -> None:
        super().__init__(
            "kind",
            "INDEX_KIND_CHUNK is not served by the embedder: chunks are written by ingest only; call "
            "knowledge.v1.IngestJobService/IngestText (POST /api/v1/knowledge/texts) with document_id, or with "
            "corpus_id for a new document",
            rpc="knowledge.v1.IngestJobService/IngestText",
        )


class TokenizerChanged(FailedPrecondition):
    """Texts sized with another tokenizer than the model's: embedding them would mix two models'
    windows. The caller sizes them again with this one (ReadTokenizer)."""

    reason = "TOKENIZER_CHANGED"

    def __init__(self, sent: str, own: str) -> None:
        super().__init__(
            "the texts were sized with another tokenizer than the embedder's; read it again (ReadTokenizer)",
            metadata={"tokenizer_sha256": own, "sent_tokenizer_sha256": sent[:64]},
        )


class AnchorNotFound(NotFound):
    reason = "ANCHOR_NOT_FOUND"

    def __init__(self, entity_type: str, entity_id: str) -> None:
        super().__init__("anchor not found", metadata={"entity_type": entity_type, "entity_id": entity_id[:256]})


class RerankUnavailable(Refused):
    """Rerank without a configured reranking model: a clear refusal, never a silent no-op.
    RUNTIME_UNAVAILABLE (the closed set's), naming what to configure."""

    def __init__(self) -> None:
        super().__init__(
            Refusal.RUNTIME_UNAVAILABLE,
            "no reranking model is configured on the embedder (KNOWLEDGE_RERANK_MODEL)",
            metadata={"runtime": "reranker"},
        )


class EmbeddingServerUnavailable(Refused):
    """The remote embedding server (backend ``remote``) cannot answer now: unreachable, timing
    out, overloaded or failing, after the retries; or its breaker is open. RUNTIME_UNAVAILABLE
    with ``runtime=embedding-server``: waiting helps, so ingest's jobs wait without spending an
    attempt and search falls back to its keyword channel."""

    def __init__(self, why: str) -> None:
        super().__init__(
            Refusal.RUNTIME_UNAVAILABLE,
            f"the embedding server is unavailable ({why}); retry later",
            metadata={"runtime": EMBEDDING_SERVER},
        )


class EmbeddingServerRejected(FailedPrecondition):
    """The remote embedding server refused a request as such (a 4xx other than 429: a wrong
    credential, an unknown model, an input it will not take); retrying the same would not help."""

    def __init__(self, status: int) -> None:
        super().__init__(f"the embedding server refused the request (HTTP {status}); check KNOWLEDGE_EMBEDDER_REMOTE_*")
