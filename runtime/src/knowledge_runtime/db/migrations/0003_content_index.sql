-- content-index: a blob's GC grace period runs from its last write, and the tenants that wrote a
-- blob may see it before anything references it.

-- When a writer last stored or ensured these bytes (WriteBlob / EnsureBlob restart it); GC only
-- removes an unreferenced blob once this is older than the grace period.
ALTER TABLE content_blobs ADD COLUMN last_write_time timestamptz NOT NULL DEFAULT now();
UPDATE content_blobs SET last_write_time = create_time;
CREATE INDEX content_blobs_last_write ON content_blobs (last_write_time);

-- The tenants that wrote a blob's bytes: who may see it. Not a reference (GC ignores it).
CREATE TABLE content_blob_writers (
    blob_id          bigint NOT NULL REFERENCES content_blobs (blob_id) ON DELETE CASCADE,
    tenant_id        text NOT NULL,
    first_write_time timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (blob_id, tenant_id)
);

-- GC's reference checks and the foreign-key check of a blob's deletion look ingest jobs up by blob.
CREATE INDEX IF NOT EXISTS ingest_jobs_blob ON ingest_jobs (blob_id);

GRANT SELECT, INSERT, DELETE ON content_blob_writers TO knowledge_content_index;
