-- Passages by reference: a document's versions are content hashes. documents.source_sha256 is the
-- caller's hash of the version searchable now (set by the job that stored it, in its storing
-- transaction); ingest_jobs.content_sha256 the hash the job indexes. A version with the hash of
-- the searchable one is unchanged (nothing to do); another is a new job on the same document,
-- whose passages replace the old ones when it stores.
ALTER TABLE documents ADD COLUMN source_sha256 text CHECK (source_sha256 IS NULL OR source_sha256 ~ '^[0-9a-f]{64}$');
ALTER TABLE ingest_jobs ADD COLUMN content_sha256 text CHECK (content_sha256 IS NULL OR content_sha256 ~ '^[0-9a-f]{64}$');

-- What a tenant's plan includes, named by feature (e.g. platform_index); empty: every feature. Set
-- by the operator (UpdateTenantSettings); a feature outside it is refused with PLAN_REQUIRED.
ALTER TABLE tenant_settings ADD COLUMN features text[] NOT NULL DEFAULT '{}';

-- A new version replaces a document's chunks: its storing transaction changes source_sha256, which
-- bumps the scope generation even when the chunk count and state stay the same, so search's
-- cached answers never hold the old version's chunks.
DROP TRIGGER documents_scope_generation ON documents;
CREATE CONSTRAINT TRIGGER documents_scope_generation AFTER UPDATE ON documents
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN ((OLD.state IS DISTINCT FROM NEW.state AND 'SEARCHABLE' IN (OLD.state, NEW.state))
          OR OLD.corpus_id IS DISTINCT FROM NEW.corpus_id
          OR OLD.chunk_count IS DISTINCT FROM NEW.chunk_count
          OR OLD.filename IS DISTINCT FROM NEW.filename
          OR OLD.source_url IS DISTINCT FROM NEW.source_url
          OR OLD.deleted_at IS DISTINCT FROM NEW.deleted_at
          OR OLD.metadata IS DISTINCT FROM NEW.metadata
          OR OLD.source_sha256 IS DISTINCT FROM NEW.source_sha256)
    EXECUTE FUNCTION scope_bump_document();
