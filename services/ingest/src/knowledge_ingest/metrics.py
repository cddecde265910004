"""Ingest's Prometheus metrics. The Kubernetes autoscaler reads the job backlog by name."""

from __future__ import annotations

from prometheus_client import Gauge

JOBS_BACKLOG = Gauge(
    "knowledge_ingest_jobs_backlog",
    "Ingestion jobs not yet ended (queued, waiting to retry, or running), across all replicas.",
)
