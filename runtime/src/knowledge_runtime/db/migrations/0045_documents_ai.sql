-- Document AI (issue 20): a tenant's taxonomy of document types, the versioned extraction schemas
-- of each, and the durable results of processing a document. Written only by documents-ai
-- (role knowledge_documents_ai), which reads documents and chunks within the caller's reach and
-- never writes them. No foreign key to tenants: documents-ai's first call may come before any
-- ingest (tenants are ingest's).

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'knowledge_documents_ai') THEN
        CREATE ROLE knowledge_documents_ai LOGIN;
    END IF;
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO knowledge_documents_ai', current_database());
END
$$;
GRANT USAGE ON SCHEMA public TO knowledge_documents_ai;

CREATE TABLE document_types (
    tenant_id      text NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 200),
    name           text NOT NULL CHECK (name ~ '^[a-z][a-z0-9_]*$' AND length(name) <= 64),
    description    text NOT NULL CHECK (length(description) BETWEEN 1 AND 2000),
    examples       text[] NOT NULL DEFAULT '{}',
    added_by       text NOT NULL DEFAULT '',
    add_time       timestamptz NOT NULL DEFAULT now(),
    reason         text NOT NULL DEFAULT '',
    -- 'person': CreateDocumentType; 'proposal': ProcessDocument grew the taxonomy for a document
    origin         text NOT NULL DEFAULT 'person' CHECK (origin IN ('person', 'proposal')),
    proposed_for   bigint,
    -- reversible: a retired type leaves classification, keeps its schemas and results
    retire_time    timestamptz,
    retired_by     text,
    PRIMARY KEY (tenant_id, name)
);

CREATE TABLE extraction_schemas (
    tenant_id   text NOT NULL,
    type_name   text NOT NULL,
    version     integer NOT NULL CHECK (version >= 1),
    json_schema jsonb NOT NULL,
    added_by    text NOT NULL DEFAULT '',
    add_time    timestamptz NOT NULL DEFAULT now(),
    origin      text NOT NULL DEFAULT 'person' CHECK (origin IN ('person', 'generated')),
    PRIMARY KEY (tenant_id, type_name, version),
    FOREIGN KEY (tenant_id, type_name) REFERENCES document_types (tenant_id, name) ON DELETE CASCADE
);

-- One row per (document, content hash, schema version): processing the same content with the
-- same schema again answers this row. schema_version 0: no schema (unclassified, or no model).
CREATE TABLE processing_results (
    result_id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id      text NOT NULL,
    document_id    bigint NOT NULL REFERENCES documents (document_id) ON DELETE CASCADE,
    content_hash   text NOT NULL CHECK (content_hash ~ '^[0-9a-f]{64}$'),
    type_name      text NOT NULL,
    confidence     double precision NOT NULL,
    proposed_type  boolean NOT NULL DEFAULT false,
    schema_version integer NOT NULL DEFAULT 0 CHECK (schema_version >= 0),
    -- {"fields": [...], "dropped": [...], "tables": [...], "notes": [...]}: values with evidence
    outcome        jsonb NOT NULL,
    cost           jsonb NOT NULL DEFAULT '{}',
    timings        jsonb NOT NULL DEFAULT '{}',
    run_by         text NOT NULL DEFAULT '',
    model          text NOT NULL DEFAULT '',
    create_time    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, document_id, content_hash, schema_version)
);
CREATE INDEX processing_results_document ON processing_results (tenant_id, document_id, result_id DESC);

GRANT SELECT, INSERT, UPDATE ON document_types TO knowledge_documents_ai;
GRANT SELECT, INSERT ON extraction_schemas TO knowledge_documents_ai;
GRANT SELECT, INSERT ON processing_results TO knowledge_documents_ai;
-- reads what it classifies and extracts (never writes it), the reach of a caller, enablement
GRANT SELECT ON documents, chunks, corpora, scope_nodes, scope_generations, tenant_settings TO knowledge_documents_ai;
-- every LLM call's cost, in the one cost ledger (and the tenant's LLM budget read from it)
GRANT SELECT, INSERT ON cost_records TO knowledge_documents_ai;
