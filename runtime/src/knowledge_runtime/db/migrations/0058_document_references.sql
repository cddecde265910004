-- The caller's own name for a document: a platform service indexes passages under its file's
-- reference (its object's path in the project's storage), and filters read it (document_ref,
-- "prefix/*" matching a prefix). One live document per (corpus, reference): a new version of a
-- reference is new content of that document, never a second one. A deleted document leaves the
-- reference free at once (its removal is pending). text_pattern_ops: the same index serves the
-- equality of an index or a removal and the prefix of a filter (LIKE 'prefix%').
ALTER TABLE documents ADD COLUMN document_ref text CHECK (document_ref IS NULL OR length(document_ref) BETWEEN 1 AND 1024);
CREATE UNIQUE INDEX documents_reference ON documents (corpus_id, document_ref text_pattern_ops)
    WHERE document_ref IS NOT NULL AND deleted_at IS NULL;
