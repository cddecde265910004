"""Ingest use cases: what a caller can ask, independent of gRPC and PostgreSQL."""
