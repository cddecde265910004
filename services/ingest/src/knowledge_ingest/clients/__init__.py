"""Ingest's clients of content-index and the embedder, and their readiness."""
