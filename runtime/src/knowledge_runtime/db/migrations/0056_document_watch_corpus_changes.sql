-- A live document list (WatchDocuments, 0032) also hears when its corpus moves, changes band or
-- is deleted: the payload names the corpus and no document ("d": null). A watcher checks its
-- reach again on every announcement; without this one, a corpus rebound out of its reach would
-- say nothing until one of its documents changed. Delivered at commit, like the others.
CREATE FUNCTION documents_watch_after_corpus() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM documents_watch_notify(NEW.tenant_id, NEW.corpus_id, NULL);
    RETURN NULL;
END
$$;

CREATE TRIGGER documents_watch_corpus AFTER UPDATE OF scope_path, confidentiality, deleted_at ON corpora
    FOR EACH ROW
    WHEN (OLD.scope_path IS DISTINCT FROM NEW.scope_path OR OLD.confidentiality IS DISTINCT FROM NEW.confidentiality
          OR OLD.deleted_at IS DISTINCT FROM NEW.deleted_at)
    EXECUTE FUNCTION documents_watch_after_corpus();
