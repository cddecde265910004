-- A corpus may carry a caller-chosen key (projects/42/production): the platform's name for a
-- collection, given in place of corpus_id wherever a request names a corpus. Unique where names
-- are (per scope node and band, among live corpora: migration 0055's rule), so a key held out of a
-- creator's reach does not exist for it; knowledge_runtime.corpus_keys decides which corpus a key
-- names for a reader. The second index serves that lookup (a tenant's corpora bearing a key).
ALTER TABLE corpora ADD COLUMN key text CHECK (key IS NULL OR key ~ '^[A-Za-z0-9][A-Za-z0-9._:/-]{0,199}$');
CREATE UNIQUE INDEX corpora_node_key ON corpora (tenant_id, scope_path, confidentiality, key)
    WHERE key IS NOT NULL AND deleted_at IS NULL;
CREATE INDEX corpora_tenant_key ON corpora (tenant_id, key) WHERE key IS NOT NULL AND deleted_at IS NULL;
