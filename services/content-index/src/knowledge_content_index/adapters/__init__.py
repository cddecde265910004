"""Adapters behind content-index's ports: PostgreSQL, the local filesystem, the key file."""
