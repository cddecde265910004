"""The embedder's Prometheus metrics. The Kubernetes autoscaler reads the queue depth by name."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

QUEUE_DEPTH = Gauge("knowledge_embedder_queue_depth", "Inputs waiting for a forward pass")
BATCH_SIZE = Histogram(
    "knowledge_embedder_batch_size", "Inputs per batch", buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
)
TOKENS = Counter("knowledge_embedder_tokens_total", "Tokens embedded (the rate is tokens per second)")
SKIPPED = Counter("knowledge_embedder_skipped_inputs_total", "Inputs dropped because their caller went away")
REJECTED = Counter("knowledge_embedder_rejected_inputs_total", "Inputs refused because the queue was full")
STAGE_SECONDS = Histogram(
    "knowledge_embedder_stage_seconds",
    "Seconds per stage",
    ["stage"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
RERANK_PAIRS = Counter("knowledge_embedder_rerank_pairs_total", "(query, passage) pairs scored by the reranker")
RERANK_TOKENS = Counter("knowledge_embedder_rerank_tokens_total", "Tokens of the pairs the reranker scored")
RERANK_SECONDS = Histogram(
    "knowledge_embedder_rerank_seconds",
    "Seconds of the reranker's forward passes per batch",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
REMOTE_SECONDS = Histogram(
    "knowledge_embedder_remote_request_seconds",
    "Seconds per request to the remote embedding server (each attempt)",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0),
)
REMOTE_FAILURES = Counter(
    "knowledge_embedder_remote_failures_total", "Failed attempts at the remote embedding server", ["kind"]
)
REMOTE_TOKENS = Counter(
    "knowledge_embedder_remote_usage_tokens_total", "Tokens the remote embedding server reported using (its bill)"
)
REMOTE_BREAKER_OPEN = Gauge(
    "knowledge_embedder_remote_breaker_open", "1 while the breaker before the remote embedding server is open"
)
