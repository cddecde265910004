-- Fenced imports (issue 19). The import roots themselves are operator configuration
-- (KNOWLEDGE_IMPORT_ROOTS / KNOWLEDGE_IMPORT_ROOTS_FILE), never stored here: rows only name a root.

-- Per corpus and root, whether passes over the root ingest what they find ('auto'), only record
-- it ('suggest') or do nothing ('off'); who set it and when is kept.
CREATE TABLE import_bindings (
    tenant_id      text NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    corpus_id      bigint NOT NULL REFERENCES corpora (corpus_id) ON DELETE CASCADE,
    root_name      text NOT NULL CHECK (length(root_name) BETWEEN 1 AND 64),
    mode           text NOT NULL CHECK (mode IN ('off', 'suggest', 'auto')),
    set_by         text NOT NULL,
    update_time    timestamptz NOT NULL DEFAULT now(),
    -- when a scheduled pass last claimed this binding (NULL: never)
    last_scan_time timestamptz,
    PRIMARY KEY (tenant_id, corpus_id, root_name)
);

-- One row per (corpus, root, path, content hash) a pass saw as new or changed, or that an
-- import read. A dismissed finding is kept: it records that somebody looked.
CREATE TABLE import_findings (
    finding_id    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id     text NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    corpus_id     bigint NOT NULL REFERENCES corpora (corpus_id) ON DELETE CASCADE,
    root_name     text NOT NULL,
    path          text NOT NULL,  -- relative to the root
    content_hash  text NOT NULL,  -- hex SHA-256 of the bytes the pass read
    size_bytes    bigint NOT NULL CHECK (size_bytes >= 0),
    kind          text NOT NULL CHECK (kind IN ('new', 'changed')),
    state         text NOT NULL CHECK (state IN ('open', 'accepted', 'dismissed')),
    job_id        uuid,
    decided_by    text,
    decided_time  timestamptz,
    create_time   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, corpus_id, root_name, path, content_hash)
);
CREATE INDEX import_findings_list ON import_findings (tenant_id, corpus_id, finding_id);

GRANT SELECT, INSERT, UPDATE, DELETE ON import_bindings, import_findings TO knowledge_ingest;
