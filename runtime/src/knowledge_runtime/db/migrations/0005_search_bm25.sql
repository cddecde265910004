-- Search: BM25 term statistics kept correct by triggers on chunks, whoever writes them, and
-- per-corpus fusion weights.
--
-- BM25 needs, per tenant, the number of chunks holding each lexeme (document frequency), the
-- number of chunks and their total length. The writing roles (embedder, ingest) get no grant on
-- these tables: SECURITY DEFINER trigger functions with a fixed search_path maintain them in the
-- writer's own transaction, so a rolled-back insert or delete leaves them untouched. Statement
-- triggers with transition tables aggregate a bulk insert into one upsert per lexeme, ordered by
-- key so that concurrent writers lock rows in the same order.
--
-- Deltas travel as upserts (a removal is a negative insert), so these tables carry no CHECK >= 0:
-- PostgreSQL checks the proposed row before resolving the conflict.
--
-- A chunk's BM25 length is its number of lexeme positions (headings included); the search
-- service computes it from the tsvector with the same function, so the two never disagree.

CREATE TABLE search_tenant_stats (
    tenant_id    text PRIMARY KEY,
    chunk_count  bigint NOT NULL DEFAULT 0,
    total_length bigint NOT NULL DEFAULT 0
);

CREATE TABLE search_lexeme_stats (
    tenant_id text NOT NULL,
    lexeme    text NOT NULL,
    doc_freq  bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, lexeme)
);

-- Fusion weights of one corpus; a request's own weights win, equal weights when neither is set.
CREATE TABLE corpus_search_weights (
    corpus_id      bigint PRIMARY KEY REFERENCES corpora (corpus_id) ON DELETE CASCADE,
    vector_weight  double precision NOT NULL DEFAULT 1.0 CHECK (vector_weight >= 0),
    lexical_weight double precision NOT NULL DEFAULT 1.0 CHECK (lexical_weight >= 0),
    update_time    timestamptz NOT NULL DEFAULT now(),
    CHECK (vector_weight + lexical_weight > 0)
);

CREATE FUNCTION search_bm25_length(v tsvector) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT coalesce(sum(coalesce(array_length(u.positions, 1), 1)), 0)::integer
    FROM pg_catalog.unnest(v) AS u
$$;

-- The lexemes a chunk gets when its writer leaves them empty: heading A, body D.
CREATE FUNCTION search_chunk_lexemes(section text, content text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT pg_catalog.setweight(pg_catalog.to_tsvector('pg_catalog.english', coalesce(section, '')), 'A')
        || pg_catalog.setweight(pg_catalog.to_tsvector('pg_catalog.english', coalesce(content, '')), 'D')
$$;

-- Adds (sign = 1) or removes (sign = -1) the statistics of a set of chunks.
CREATE FUNCTION search_stats_add(tenants text[], vectors tsvector[], sign integer) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public
AS $$
    INSERT INTO public.search_tenant_stats AS s (tenant_id, chunk_count, total_length)
    SELECT r.t, sign * count(*), sign * coalesce(sum(public.search_bm25_length(r.v)), 0)
    FROM unnest(tenants, vectors) AS r (t, v)
    GROUP BY r.t
    ORDER BY r.t
    ON CONFLICT (tenant_id) DO UPDATE
        SET chunk_count = s.chunk_count + EXCLUDED.chunk_count,
            total_length = s.total_length + EXCLUDED.total_length;

    INSERT INTO public.search_lexeme_stats AS s (tenant_id, lexeme, doc_freq)
    SELECT r.t, u.lexeme, sign * count(*)
    FROM unnest(tenants, vectors) AS r (t, v), unnest(r.v) AS u
    GROUP BY r.t, u.lexeme
    ORDER BY r.t, u.lexeme
    ON CONFLICT (tenant_id, lexeme) DO UPDATE SET doc_freq = s.doc_freq + EXCLUDED.doc_freq;
$$;
REVOKE ALL ON FUNCTION search_stats_add(text[], tsvector[], integer) FROM PUBLIC;

CREATE FUNCTION search_stats_after_insert() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public
AS $$
BEGIN
    PERFORM public.search_stats_add(array_agg(tenant_id), array_agg(lexemes), 1) FROM new_rows;
    RETURN NULL;
END
$$;

CREATE FUNCTION search_stats_after_delete() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public
AS $$
BEGIN
    PERFORM public.search_stats_add(array_agg(tenant_id), array_agg(lexemes), -1) FROM old_rows;
    RETURN NULL;
END
$$;

-- Only rows whose tenant or lexemes changed move the statistics (a corpus move does not).
CREATE FUNCTION search_stats_after_update() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public
AS $$
BEGIN
    PERFORM public.search_stats_add(array_agg(o.tenant_id), array_agg(o.lexemes), -1)
    FROM old_rows o JOIN new_rows n USING (chunk_id)
    WHERE o.tenant_id IS DISTINCT FROM n.tenant_id OR o.lexemes IS DISTINCT FROM n.lexemes;
    PERFORM public.search_stats_add(array_agg(n.tenant_id), array_agg(n.lexemes), 1)
    FROM old_rows o JOIN new_rows n USING (chunk_id)
    WHERE o.tenant_id IS DISTINCT FROM n.tenant_id OR o.lexemes IS DISTINCT FROM n.lexemes;
    RETURN NULL;
END
$$;

CREATE FUNCTION search_stats_after_truncate() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public
AS $$
BEGIN
    DELETE FROM public.search_lexeme_stats;
    DELETE FROM public.search_tenant_stats;
    RETURN NULL;
END
$$;

CREATE FUNCTION search_fill_lexemes() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public
AS $$
BEGIN
    IF NEW.lexemes = ''::tsvector THEN
        NEW.lexemes := public.search_chunk_lexemes(NEW.section, NEW.content);
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER chunks_fill_lexemes BEFORE INSERT ON chunks
    FOR EACH ROW EXECUTE FUNCTION search_fill_lexemes();
CREATE TRIGGER chunks_search_stats_insert AFTER INSERT ON chunks
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION search_stats_after_insert();
CREATE TRIGGER chunks_search_stats_delete AFTER DELETE ON chunks
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION search_stats_after_delete();
CREATE TRIGGER chunks_search_stats_update AFTER UPDATE ON chunks
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION search_stats_after_update();
CREATE TRIGGER chunks_search_stats_truncate AFTER TRUNCATE ON chunks
    FOR EACH STATEMENT EXECUTE FUNCTION search_stats_after_truncate();

-- Chunks written before this migration.
SELECT search_stats_add(array_agg(tenant_id), array_agg(lexemes), 1) FROM chunks;

GRANT SELECT ON search_tenant_stats, search_lexeme_stats, corpus_search_weights TO knowledge_search;
GRANT SELECT, INSERT, UPDATE, DELETE ON corpus_search_weights TO knowledge_ingest;
