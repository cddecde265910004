-- One role per service with the least privilege it needs, so a bug in one bounded context
-- cannot write another's tables. Roles are created when missing (the embedded cluster
-- authenticates them over its unix socket); on a managed server the operator may create
-- them beforehand with passwords, and this migration only grants.

DO $$
DECLARE
    role_name text;
BEGIN
    FOREACH role_name IN ARRAY ARRAY['knowledge_content_index', 'knowledge_embedder', 'knowledge_ingest', 'knowledge_search']
    LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = role_name) THEN
            EXECUTE format('CREATE ROLE %I LOGIN', role_name);
        END IF;
        EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), role_name);
        EXECUTE format('GRANT USAGE ON SCHEMA public TO %I', role_name);
    END LOOP;
END
$$;

REVOKE ALL ON ALL TABLES IN SCHEMA public FROM PUBLIC;

-- content-index: the only writer of content_blobs; reads what references blobs.
GRANT SELECT, INSERT, UPDATE, DELETE ON content_blobs TO knowledge_content_index;
GRANT SELECT ON tenants, documents, ingest_jobs TO knowledge_content_index;

-- embedder: writes chunk rows, anchors and cost records; reads the documents it binds to.
GRANT SELECT, INSERT ON chunks TO knowledge_embedder;
GRANT SELECT, INSERT, UPDATE, DELETE ON anchors TO knowledge_embedder;
GRANT SELECT, INSERT ON cost_records TO knowledge_embedder;
GRANT SELECT ON documents, corpora TO knowledge_embedder;

-- ingest: corpora, documents, jobs; moves and deletes chunks; never touches blobs.
GRANT SELECT, INSERT, UPDATE ON tenants TO knowledge_ingest;
GRANT SELECT, INSERT, UPDATE, DELETE ON corpora, documents, ingest_jobs TO knowledge_ingest;
GRANT SELECT, INSERT, UPDATE, DELETE ON chunks TO knowledge_ingest;
GRANT SELECT ON content_blobs TO knowledge_ingest;

-- search: reads chunks and their documents, never writes them; records answer costs.
GRANT SELECT ON chunks, documents, corpora TO knowledge_search;
GRANT SELECT, INSERT ON cost_records TO knowledge_search;
