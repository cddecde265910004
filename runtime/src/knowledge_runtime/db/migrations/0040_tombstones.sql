-- Deletion as a durable job, with tombstones (issue 18).
--
-- DeleteDocument answers at once: in one transaction the document is marked deleted
-- (documents.deleted_at), which every read filters (ingest's reads, search's hydration, the usage
-- counts), its jobs go (their blob references with them), a tombstone records what it was, and the
-- document.removed event is written. The tombstone row is also the removal job: a worker claims it
-- under a lease (FOR UPDATE SKIP LOCKED, as ingest_jobs), deletes the chunks in batches, then the
-- document row (its blob reference: content-index's GC collects an unreferenced blob), and marks it
-- done; a removal interrupted by a crash is claimed again once its lease has expired.
--
-- DeleteCorpus marks the corpus deleted (corpora.deleted_at: out of every reach at once) and
-- tombstones each of its documents; the last removal of its documents deletes its row.
ALTER TABLE documents ADD COLUMN deleted_at timestamptz;
ALTER TABLE corpora ADD COLUMN deleted_at timestamptz;
-- The removals still pending, for the removal's final check of a deleted corpus.
CREATE INDEX documents_deleted ON documents (corpus_id) WHERE deleted_at IS NOT NULL;

CREATE TABLE document_tombstones (
    tombstone_id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id        text NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    -- no foreign keys: a tombstone outlives the document, its corpus and its blob
    document_id      bigint NOT NULL UNIQUE,
    corpus_id        bigint NOT NULL,
    -- where the corpus was, so a listing obeys the caller's reach after the corpus is gone
    scope_path       text NOT NULL,
    confidentiality  text NOT NULL,
    filename         text NOT NULL,
    content_hash     text,  -- the blob's (content-index's naming), never a reference to it
    chunk_count      integer NOT NULL CHECK (chunk_count >= 0),
    deleted_by       text NOT NULL,  -- the token's subject
    reason           text NOT NULL,
    delete_time      timestamptz NOT NULL DEFAULT now(),
    -- the removal job
    removal_state    text NOT NULL DEFAULT 'PENDING' CHECK (removal_state IN ('PENDING', 'DONE')),
    remove_time      timestamptz,
    attempts         integer NOT NULL DEFAULT 0,
    interruptions    integer NOT NULL DEFAULT 0,
    lease_owner      text,
    lease_expires_at timestamptz,
    not_before       timestamptz NOT NULL DEFAULT now(),
    last_error       text
);
CREATE INDEX document_tombstones_pending ON document_tombstones (not_before) WHERE removal_state = 'PENDING';
CREATE INDEX document_tombstones_tenant ON document_tombstones (tenant_id, corpus_id, tombstone_id);
CREATE INDEX document_tombstones_retention ON document_tombstones (delete_time) WHERE removal_state = 'DONE';

GRANT SELECT, INSERT, UPDATE, DELETE ON document_tombstones TO knowledge_ingest;

-- A deletion bumps the scope generation of the document's node (search's cache), as a delete did.
DROP TRIGGER documents_scope_generation ON documents;
CREATE CONSTRAINT TRIGGER documents_scope_generation AFTER UPDATE ON documents
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN ((OLD.state IS DISTINCT FROM NEW.state AND 'SEARCHABLE' IN (OLD.state, NEW.state))
          OR OLD.corpus_id IS DISTINCT FROM NEW.corpus_id
          OR OLD.chunk_count IS DISTINCT FROM NEW.chunk_count
          OR OLD.filename IS DISTINCT FROM NEW.filename
          OR OLD.source_url IS DISTINCT FROM NEW.source_url
          OR OLD.deleted_at IS DISTINCT FROM NEW.deleted_at)
    EXECUTE FUNCTION scope_bump_document();
