-- The knowledge schema: tenants, corpora, content blobs, documents, chunks, ingest jobs,
-- anchors and cost records. {{EMBEDDING_DIMENSION}} is the embedding model's dimension,
-- substituted by the migrator; identifiers are bigint or uuid and travel as strings.

CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE tenants (
    tenant_id       text PRIMARY KEY CHECK (length(tenant_id) BETWEEN 1 AND 200),
    -- An isolated tenant's blobs are identified by HMAC-SHA256 under its own key, so it
    -- never shares a blob with anyone.
    isolate_content boolean NOT NULL DEFAULT false,
    create_time     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE corpora (
    corpus_id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- NULL for a system corpus, which every tenant may read and upload to.
    tenant_id   text REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    description text NOT NULL DEFAULT '' CHECK (length(description) <= 2000),
    is_system   boolean NOT NULL DEFAULT false,
    create_time timestamptz NOT NULL DEFAULT now(),
    CHECK (is_system OR tenant_id IS NOT NULL)
);
CREATE UNIQUE INDEX corpora_tenant_name ON corpora (tenant_id, name) NULLS NOT DISTINCT;

CREATE TABLE content_blobs (
    blob_id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- hex SHA-256 of the bytes, or 'hmac-sha256:<hex>' for an isolated tenant's blob.
    content_hash text NOT NULL UNIQUE,
    size_bytes   bigint NOT NULL CHECK (size_bytes >= 0),
    mime_type    text NOT NULL DEFAULT 'application/octet-stream',
    storage_uri  text NOT NULL,
    create_time  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE documents (
    document_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id   text NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    corpus_id   bigint NOT NULL REFERENCES corpora (corpus_id) ON DELETE RESTRICT,
    blob_id     bigint REFERENCES content_blobs (blob_id) ON DELETE RESTRICT,
    filename    text NOT NULL,
    mime_type   text NOT NULL DEFAULT '',
    source_url  text,
    state       text NOT NULL DEFAULT 'QUEUED' CHECK (state IN
                ('QUEUED', 'EXTRACTING', 'CHUNKING', 'EMBEDDING', 'STORING', 'SEARCHABLE', 'FAILED', 'CANCELLED')),
    error       text,
    extractable boolean,
    chunk_count integer NOT NULL DEFAULT 0 CHECK (chunk_count >= 0),
    create_time timestamptz NOT NULL DEFAULT now(),
    update_time timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX documents_tenant_corpus ON documents (tenant_id, corpus_id);
CREATE INDEX documents_blob ON documents (blob_id);

CREATE TABLE chunks (
    chunk_id    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id   text NOT NULL,
    corpus_id   bigint NOT NULL,
    document_id bigint NOT NULL REFERENCES documents (document_id) ON DELETE CASCADE,
    chunk_index integer NOT NULL CHECK (chunk_index >= 0),
    section     text NOT NULL DEFAULT '',
    page        integer,
    content     text NOT NULL,
    embedding   vector({{EMBEDDING_DIMENSION}}) NOT NULL,
    -- weighted lexemes: A for headings, D for body text (the lexical channel)
    lexemes     tsvector NOT NULL DEFAULT ''::tsvector,
    length      integer NOT NULL DEFAULT 0 CHECK (length >= 0),
    metadata    jsonb NOT NULL CHECK (metadata ? 'document_id'),
    UNIQUE (document_id, chunk_index)
);
CREATE INDEX chunks_embedding_hnsw ON chunks USING hnsw (embedding vector_cosine_ops);
CREATE INDEX chunks_lexemes ON chunks USING gin (lexemes);
CREATE INDEX chunks_tenant_corpus ON chunks (tenant_id, corpus_id);

CREATE TABLE ingest_jobs (
    job_id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id        text NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    corpus_id        bigint NOT NULL REFERENCES corpora (corpus_id) ON DELETE CASCADE,
    document_id      bigint REFERENCES documents (document_id) ON DELETE SET NULL,
    blob_id          bigint REFERENCES content_blobs (blob_id) ON DELETE RESTRICT,
    filename         text NOT NULL,
    state            text NOT NULL DEFAULT 'QUEUED' CHECK (state IN
                     ('QUEUED', 'EXTRACTING', 'CHUNKING', 'EMBEDDING', 'STORING', 'SEARCHABLE', 'FAILED', 'CANCELLED')),
    stage            text NOT NULL DEFAULT 'queued',
    progress         double precision NOT NULL DEFAULT 0 CHECK (progress >= 0 AND progress <= 1),
    error            text,
    result           jsonb,
    result_delivered boolean NOT NULL DEFAULT false,
    attempts         integer NOT NULL DEFAULT 0,
    cancel_requested boolean NOT NULL DEFAULT false,
    lease_owner      text,
    lease_expires_at timestamptz,
    not_before       timestamptz NOT NULL DEFAULT now(),
    create_time      timestamptz NOT NULL DEFAULT now(),
    update_time      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ingest_jobs_claimable ON ingest_jobs (not_before)
    WHERE state NOT IN ('SEARCHABLE', 'FAILED', 'CANCELLED');
CREATE INDEX ingest_jobs_tenant ON ingest_jobs (tenant_id, create_time);

CREATE TABLE anchors (
    anchor_id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id     text NOT NULL,
    entity_type   text NOT NULL,
    entity_id     text NOT NULL,
    embedding     vector({{EMBEDDING_DIMENSION}}) NOT NULL,
    content_chars integer NOT NULL DEFAULT 0,
    update_time   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, entity_type, entity_id)
);
CREATE INDEX anchors_embedding_hnsw ON anchors USING hnsw (embedding vector_cosine_ops);

CREATE TABLE cost_records (
    cost_id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id   text,
    model       text NOT NULL,
    operation   text NOT NULL,
    texts       integer NOT NULL CHECK (texts >= 0),
    tokens      bigint NOT NULL CHECK (tokens >= 0),
    cost        numeric(14, 6) NOT NULL DEFAULT 0,
    create_time timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX cost_records_tenant_time ON cost_records (tenant_id, create_time);
