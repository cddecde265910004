-- Who may read a document inside its corpus: an access list of principals ("user:<sub>",
-- "group:<name>"). An empty list means what it always meant: everyone whose token reaches the
-- corpus (its scope node and band). The rule is knowledge_runtime.reach.may_read_document;
-- document_readable below is its SQL twin, applied inside every query that reads documents
-- (search's two channels and its hydration, ingest's reads, document AI's), and a test runs one
-- table of cases through both. Ingest stores a list checked, deduplicated and sorted.
ALTER TABLE documents ADD COLUMN principals text[] NOT NULL DEFAULT '{}'
    CHECK (cardinality(principals) <= 100 AND array_position(principals, NULL) IS NULL);

-- An SQL function of one expression, not strict and IMMUTABLE, is inlined where it is called: the
-- planner sees `cardinality(listed) = 0 OR listed && caller` itself (`&&` can use the GIN index
-- below), at no cost of a function call per row. A NULL list (a chunk whose document row is gone)
-- reads as not readable.
CREATE FUNCTION document_readable(listed text[], caller text[]) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT cardinality(listed) = 0 OR listed && caller $$;

-- Lookups by principal (`principals && ARRAY['group:hr']`: the documents a group is named in, e.g.
-- for an operator offboarding it). Search's channels do not take this path: they judge each
-- candidate by its document's primary key, because a semi-join over the readable documents let the
-- planner trade the HNSW scan for an exact one on a wrong estimate (bench/search_latency.py
-- measures the channels with the rule on and off).
CREATE INDEX documents_principals ON documents USING gin (principals);

-- A corpus's list for the documents created in it when the request names none (CreateCorpus,
-- SetCorpusDefaultAccess); a document keeps its own list after that.
ALTER TABLE corpora ADD COLUMN default_principals text[] NOT NULL DEFAULT '{}'
    CHECK (cardinality(default_principals) <= 100 AND array_position(default_principals, NULL) IS NULL);

-- Every change of a document's list: who, when, the list before and after. Written by ingest in
-- the transaction that changes the list; no foreign key, so the record outlives the document.
CREATE TABLE document_access_changes (
    change_id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id      text NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    document_id    bigint NOT NULL,
    corpus_id      bigint NOT NULL,
    changed_by     text NOT NULL,  -- the token's subject
    change_time    timestamptz NOT NULL DEFAULT now(),
    old_principals text[] NOT NULL,
    new_principals text[] NOT NULL
);
CREATE INDEX document_access_changes_document ON document_access_changes (tenant_id, document_id, change_id);

-- A deleted document's tombstone, and an event, keep the list the document had, so that what they
-- say (a filename, a chunk count) stays with the readers the document had: once the document row
-- is gone, that list is all there is to judge by (an event is judged by the document's list now
-- while the row is there, as by its corpus's placement now: migration 0043).
ALTER TABLE document_tombstones ADD COLUMN principals text[] NOT NULL DEFAULT '{}';
ALTER TABLE events ADD COLUMN principals text[] NOT NULL DEFAULT '{}';

-- A change of a list changes what searches find: it bumps the scope generation, so search's cached
-- answers (keyed by it) from before the change are never served after its commit. The watch
-- (0032) already announces every update of a document row.
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
          OR OLD.source_sha256 IS DISTINCT FROM NEW.source_sha256
          OR OLD.principals IS DISTINCT FROM NEW.principals)
    EXECUTE FUNCTION scope_bump_document();

GRANT SELECT, INSERT ON document_access_changes TO knowledge_ingest;
