"""Intake and its durable jobs: uploads, texts, web pages; the job queue, the pipeline and its workers (IngestJobService)."""
