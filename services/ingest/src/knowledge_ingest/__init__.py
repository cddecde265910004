"""The ingest service: corpora, documents and durable ingestion jobs."""
