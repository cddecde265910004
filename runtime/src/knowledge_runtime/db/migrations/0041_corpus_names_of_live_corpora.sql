-- A corpus's name is unique among the tenant's live corpora only. A corpus deleted with its
-- documents (0040: corpora.deleted_at) keeps its row until their removals are done; its name is
-- free from the deletion on, as the caller can no longer see it. Every ON CONFLICT on this index
-- names the predicate (ingest's INSERT_HOUSEKEEPING).
DROP INDEX corpora_tenant_name;
CREATE UNIQUE INDEX corpora_tenant_name ON corpora (tenant_id, name) NULLS NOT DISTINCT WHERE deleted_at IS NULL;
