-- A live document list (WatchDocuments): every committed change of a document row, or of the
-- state or stage of one of its jobs, is announced on the channel `knowledge_documents` with the
-- payload {"t": tenant_id, "c": corpus_id, "d": document_id}. A move announces both corpora, a
-- delete the corpus it left. Listeners re-read the document, so the payload names rows only.
-- NOTIFY is delivered at commit (nothing for a transaction rolled back) and folds identical
-- payloads of one transaction into one.
CREATE FUNCTION documents_watch_notify(tenant text, corpus bigint, document bigint) RETURNS void
LANGUAGE sql AS $$
    SELECT pg_notify('knowledge_documents', json_build_object('t', tenant, 'c', corpus, 'd', document)::text)
$$;

CREATE FUNCTION documents_watch_after_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM documents_watch_notify(OLD.tenant_id, OLD.corpus_id, OLD.document_id);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') AND (TG_OP = 'INSERT' OR NEW.corpus_id IS DISTINCT FROM OLD.corpus_id) THEN
        PERFORM documents_watch_notify(NEW.tenant_id, NEW.corpus_id, NEW.document_id);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER documents_watch AFTER INSERT OR UPDATE OR DELETE ON documents
    FOR EACH ROW EXECUTE FUNCTION documents_watch_after_change();

CREATE FUNCTION documents_watch_after_job() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.document_id IS NOT NULL THEN
        PERFORM documents_watch_notify(NEW.tenant_id, NEW.corpus_id, NEW.document_id);
    END IF;
    RETURN NULL;
END
$$;

-- Only what a watcher shows (a lease renewal changes neither, and announces nothing).
CREATE TRIGGER documents_watch_job_insert AFTER INSERT ON ingest_jobs
    FOR EACH ROW EXECUTE FUNCTION documents_watch_after_job();
CREATE TRIGGER documents_watch_job_update AFTER UPDATE ON ingest_jobs
    FOR EACH ROW
    WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.stage IS DISTINCT FROM NEW.stage
          OR OLD.document_id IS DISTINCT FROM NEW.document_id)
    EXECUTE FUNCTION documents_watch_after_job();
