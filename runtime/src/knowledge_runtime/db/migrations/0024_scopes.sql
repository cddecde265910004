-- Scopes inside a tenant, confidentiality bands, and per-scope generations (issue 16).
--
-- A tenant's scope hierarchy: the root '/' always exists and has no row; any other node
-- ('workspace:eng', 'workspace:eng/project:billing', ...) exists once a row names it. Ingest
-- creates a node and its ancestors when a corpus is bound to it (BindCorpus). A corpus is bound
-- to exactly one node (a new corpus to its creator's) and carries one confidentiality band.
--
-- scope_generations counts the changes of what a node's readers see: a document becoming or
-- ceasing to be searchable, a move, a delete, a rebinding. The search service puts the sum of
-- the generations of a reader's node and its ancestors into its answer cache's key, so every
-- replica sees a change in a scope at its next request, and another scope's entries stay.
-- Deferred constraint triggers bump them at commit, whoever writes (a rolled-back change bumps
-- nothing, and the row lock on a generation is held only for the commit, never for a long
-- store transaction); SECURITY DEFINER, so the writing role needs no grant on the table.

CREATE TABLE scope_nodes (
    tenant_id   text NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    path        text NOT NULL CHECK (path <> '/' AND length(path) BETWEEN 1 AND 400),
    create_time timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, path)
);

ALTER TABLE corpora
    ADD COLUMN scope_path text NOT NULL DEFAULT '/' CHECK (length(scope_path) BETWEEN 1 AND 400),
    ADD COLUMN confidentiality text NOT NULL DEFAULT 'TENANT'
        CHECK (confidentiality IN ('GENERAL', 'TENANT', 'CONFIDENTIAL', 'RESTRICTED'));

CREATE TABLE scope_generations (
    tenant_id  text NOT NULL,
    scope_path text NOT NULL,
    generation bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, scope_path)
);

CREATE FUNCTION scope_bump(p_tenant text, p_path text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public
AS $$
    INSERT INTO public.scope_generations AS g (tenant_id, scope_path, generation)
    VALUES (p_tenant, p_path, 1)
    ON CONFLICT (tenant_id, scope_path) DO UPDATE SET generation = g.generation + 1
$$;

-- A document's change bumps the node of its corpus (both corpora's on a move).
CREATE FUNCTION scope_bump_document() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public
AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM public.scope_bump(OLD.tenant_id, c.scope_path) FROM public.corpora c WHERE c.corpus_id = OLD.corpus_id;
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.corpus_id <> OLD.corpus_id THEN
        PERFORM public.scope_bump(NEW.tenant_id, c.scope_path) FROM public.corpora c WHERE c.corpus_id = NEW.corpus_id;
    END IF;
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER documents_scope_generation AFTER UPDATE ON documents
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN ((OLD.state IS DISTINCT FROM NEW.state AND 'SEARCHABLE' IN (OLD.state, NEW.state))
          OR OLD.corpus_id IS DISTINCT FROM NEW.corpus_id
          OR OLD.chunk_count IS DISTINCT FROM NEW.chunk_count
          OR OLD.filename IS DISTINCT FROM NEW.filename
          OR OLD.source_url IS DISTINCT FROM NEW.source_url)
    EXECUTE FUNCTION scope_bump_document();
CREATE CONSTRAINT TRIGGER documents_scope_generation_delete AFTER DELETE ON documents
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION scope_bump_document();

-- Rebinding a corpus (or changing its band) bumps the node it left and the node it joined.
CREATE FUNCTION scope_bump_corpus() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public
AS $$
BEGIN
    IF OLD.tenant_id IS NOT NULL THEN
        PERFORM public.scope_bump(OLD.tenant_id, OLD.scope_path);
        PERFORM public.scope_bump(NEW.tenant_id, NEW.scope_path);
    END IF;
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER corpora_scope_generation AFTER UPDATE ON corpora
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (OLD.scope_path IS DISTINCT FROM NEW.scope_path OR OLD.confidentiality IS DISTINCT FROM NEW.confidentiality)
    EXECUTE FUNCTION scope_bump_corpus();

REVOKE ALL ON FUNCTION scope_bump(text, text) FROM PUBLIC;

GRANT SELECT, INSERT ON scope_nodes TO knowledge_ingest;
GRANT SELECT ON scope_nodes, scope_generations TO knowledge_search;
GRANT SELECT ON scope_generations TO knowledge_ingest;
