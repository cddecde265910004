"""Ingest's Prometheus metrics. The Kubernetes autoscaler reads the job backlog by name."""

from __future__ import annotations

from prometheus_client import Gauge

JOBS_BACKLOG = Gauge(
    "knowledge_ingest_jobs_backlog",
    "Ingestion jobs not yet ended (queued, waiting to retry, or running), across all replicas.",
)

# Per-tenant totals. The tenant label is bounded: the KNOWLEDGE_METRICS_MAX_TENANTS
# largest tenants by documents each get their own series, every other tenant is summed under
# tenant="_other" (domain.usage.bounded_totals), so a deployment with 100,000 tenants still
# exports at most MAX_TENANTS + 1 series per metric.
TENANT_DOCUMENTS = Gauge("knowledge_tenant_documents", "Documents a tenant holds (every state).", ["tenant"])
TENANT_STORED_BYTES = Gauge(
    "knowledge_tenant_stored_bytes", "Bytes of the files a tenant's documents hold (each blob once).", ["tenant"]
)
TENANT_CHUNKS = Gauge("knowledge_tenant_chunks", "Chunks of a tenant's documents.", ["tenant"])
