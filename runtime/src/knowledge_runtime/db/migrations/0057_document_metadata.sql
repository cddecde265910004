-- Metadata on every document, and the one jsonb per chunk that search's filters read.
--
-- documents.metadata is the caller's (set at upload, at IngestText, at IndexPassages, changed by
-- UpdateDocument); ingest checks its shape and limits before it is written. chunks.metadata,
-- which always carried the service's own keys (source, section, page, chunk_index, document_id,
-- overlap_chars), now also holds the document's metadata merged with the chunk's own passage
-- metadata (passage keys win; the service's reserved keys win over both). A filter then reads one
-- jsonb per chunk and never joins the document. chunks.passage_metadata and chunks.fragment keep
-- what a passage was given, so the merge can be made again when the document's metadata changes
-- and a hit can show the passage's own metadata apart from its document's.
ALTER TABLE documents ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(metadata) = 'object');
ALTER TABLE chunks
    ADD COLUMN fragment text CHECK (fragment IS NULL OR length(fragment) BETWEEN 1 AND 200),
    ADD COLUMN passage_metadata jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(passage_metadata) = 'object');

-- The data behind the filters is indexed: jsonb_path_ops serves the equality, IN and exists
-- conditions the filter language compiles to (@? with a jsonpath). A migration runs in one
-- transaction, where CREATE INDEX CONCURRENTLY is not allowed, so on a large chunks table this
-- build blocks writes to chunks while it runs; an operator can build the same index beforehand
-- with CREATE INDEX CONCURRENTLY under the same name, and IF NOT EXISTS keeps it
-- (docs/operations.md, "Upgrading").
CREATE INDEX IF NOT EXISTS chunks_metadata ON chunks USING gin (metadata jsonb_path_ops);
CREATE INDEX IF NOT EXISTS documents_metadata ON documents USING gin (metadata jsonb_path_ops);

-- A metadata change is a change of what a search finds: it bumps the scope generation, so
-- search's cached answers (keyed by it) are not served stale.
DROP TRIGGER documents_scope_generation ON documents;
CREATE CONSTRAINT TRIGGER documents_scope_generation AFTER UPDATE ON documents
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN ((OLD.state IS DISTINCT FROM NEW.state AND 'SEARCHABLE' IN (OLD.state, NEW.state))
          OR OLD.corpus_id IS DISTINCT FROM NEW.corpus_id
          OR OLD.chunk_count IS DISTINCT FROM NEW.chunk_count
          OR OLD.filename IS DISTINCT FROM NEW.filename
          OR OLD.source_url IS DISTINCT FROM NEW.source_url
          OR OLD.deleted_at IS DISTINCT FROM NEW.deleted_at
          OR OLD.metadata IS DISTINCT FROM NEW.metadata)
    EXECUTE FUNCTION scope_bump_document();
