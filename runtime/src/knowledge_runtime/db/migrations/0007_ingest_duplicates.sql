-- A job for bytes the tenant is already ingesting waits for that ingest, then reports the
-- document's real outcome (its chunk count), instead of answering "duplicate, 0 chunks" at once.
ALTER TABLE ingest_jobs ADD COLUMN duplicate boolean NOT NULL DEFAULT false;
