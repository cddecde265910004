-- Corpus names are unique per scope node and confidentiality band, no longer per tenant.
--
-- Unique per tenant (0001, 0041), a name taken anywhere in the tenant answered 409 to every
-- creator, so a token scoped to one project learnt the names of corpora it cannot read (another
-- branch's, or a band above its clearance at an ancestor). Now a name is taken only where it
-- sits: at one node, in one band. The band is part of the key because a reader of a lower
-- clearance at the same node must not learn a higher band's names either: its corpus is created
-- beside that one (ingest refuses a name the creator can already read at its node, before the
-- insert). Live corpora only, as in 0041: a deleted corpus's name is free at once. Every ON
-- CONFLICT on this index names its columns and predicate (ingest's INSERT_HOUSEKEEPING).
DROP INDEX corpora_tenant_name;
CREATE UNIQUE INDEX corpora_node_name ON corpora (tenant_id, scope_path, confidentiality, name) NULLS NOT DISTINCT
    WHERE deleted_at IS NULL;
