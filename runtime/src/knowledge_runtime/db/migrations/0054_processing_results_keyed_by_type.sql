-- A stored processing result is one row per (document, content hash, type, schema version):
-- schema versions count within a type, so a document processed as `unclassified` (version 0) and
-- later as a new type that has no schema yet (version 0 too) got the first row back. 0045 has
-- landed, so its key is replaced here rather than edited there (the ledger refuses a changed one).
DO $$
DECLARE
    old_key text;
BEGIN
    SELECT conname INTO old_key
    FROM pg_catalog.pg_constraint
    WHERE conrelid = 'public.processing_results'::regclass AND contype = 'u';
    IF old_key IS NOT NULL THEN
        EXECUTE pg_catalog.format('ALTER TABLE public.processing_results DROP CONSTRAINT %I', old_key);
    END IF;
END
$$;

ALTER TABLE processing_results
    ADD CONSTRAINT processing_results_content_type_version
    UNIQUE (tenant_id, document_id, content_hash, type_name, schema_version);
