-- Ingest jobs carry what the worker needs to extract (the upload's declared type) and whether
-- they re-extract an existing document (an earlier ingest of the same blob found no chunks).
ALTER TABLE ingest_jobs
    ADD COLUMN mime_type  text NOT NULL DEFAULT '',
    ADD COLUMN re_extract boolean NOT NULL DEFAULT false;

CREATE INDEX ingest_jobs_document ON ingest_jobs (document_id);
CREATE INDEX documents_tenant_blob ON documents (tenant_id, blob_id);
