"""Embedder service: the only holder of the embedding model."""
