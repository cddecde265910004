-- The model change's own evaluation: sets an operator stores (queries with the documents that
-- answer them), which ingest runs on both models when a change's shadow store is complete, and
-- the tenant a change's events go to.
--
-- A set is the operator's tenant's: its queries search one corpus of that tenant (the one its
-- documents were uploaded to), with the reach the operator had when storing it (the scope claim
-- and clearance, read back into the token ingest signs for the run). Relevance is judged by
-- document id: the documents are the tenant's own rows, so a judgement never names something
-- the corpus does not hold (a deleted document simply stops being found).
CREATE TABLE evaluation_sets (
    tenant_id   text NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    name        text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    corpus_id   bigint NOT NULL,
    scope_claim text NOT NULL,
    clearance   text NOT NULL,
    -- [{"query_id": str, "text": str, "relevant": {document id: grade}}]
    queries     jsonb NOT NULL CHECK (jsonb_typeof(queries) = 'array'),
    create_time timestamptz NOT NULL DEFAULT now(),
    update_time timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, name)
);

-- The tenant of the operator who started the change: its events are that tenant's.
ALTER TABLE model_changes ADD COLUMN tenant_id text;

GRANT SELECT, INSERT, UPDATE, DELETE ON evaluation_sets TO knowledge_ingest;
