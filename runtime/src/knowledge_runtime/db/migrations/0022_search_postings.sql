-- Search: an inverted index of the chunks' lexemes, kept by the database.
--
-- The lexical channel found its candidates with the GIN index on chunks.lexemes and then read
-- each candidate's row: EXPLAIN (ANALYZE, BUFFERS) at 100k chunks showed a query whose selective
-- terms matched 7,091 chunks reading 5,061 heap pages of chunks (wide rows: content, embedding,
-- metadata) in a bitmap heap scan, 165 of its 233 ms, and unnesting each candidate's tsvector for
-- another 65 ms. So the tail followed the number of candidates times a random page read.
--
-- search_postings holds one row per (tenant, lexeme, chunk): what BM25 needs of that term in that
-- chunk (its positions per weight tier, the chunk's BM25 length) and what the filters need (corpus,
-- document). A query reads only its own terms' postings, which lie together in the primary key;
-- the key INCLUDEs the scored columns so that an index-only scan answers without the heap.
--
-- Chunks have one writer (ingest), but the postings are the database's: statement triggers with
-- transition tables keep them in the writer's own transaction (SECURITY DEFINER, fixed
-- search_path; no writing role gets a grant), like the BM25 statistics of 0005.
CREATE TABLE search_postings (
    tenant_id   text     NOT NULL,
    lexeme      text     NOT NULL,
    chunk_id    bigint   NOT NULL,
    corpus_id   bigint   NOT NULL,
    document_id bigint   NOT NULL,
    -- positions of the lexeme in the chunk per weight tier (A heading ... D body); the search
    -- service weighs them with its configured tiers, so a change of tiers needs no rewrite
    count_a     smallint NOT NULL,
    count_b     smallint NOT NULL,
    count_c     smallint NOT NULL,
    count_d     smallint NOT NULL,
    bm25_length integer  NOT NULL,
    PRIMARY KEY (tenant_id, lexeme, chunk_id)
        INCLUDE (corpus_id, document_id, count_a, count_b, count_c, count_d, bm25_length)
);

-- A tsvector's lexemes with their positions counted per weight tier.
CREATE FUNCTION search_lexeme_counts(v tsvector)
RETURNS TABLE (lexeme text, count_a smallint, count_b smallint, count_c smallint, count_d smallint)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT u.lexeme,
           count(*) FILTER (WHERE x.w = 'A')::smallint,
           count(*) FILTER (WHERE x.w = 'B')::smallint,
           count(*) FILTER (WHERE x.w = 'C')::smallint,
           -- a lexeme without positions (a stripped vector) counts one body occurrence
           greatest(count(*) FILTER (WHERE x.w = 'D'), CASE WHEN count(x.w) = 0 THEN 1 ELSE 0 END)::smallint
    FROM pg_catalog.unnest(v) AS u
    LEFT JOIN LATERAL pg_catalog.unnest(u.weights) AS x (w) ON true
    GROUP BY u.lexeme
$$;

CREATE FUNCTION search_postings_after_insert() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public
AS $$
BEGIN
    INSERT INTO public.search_postings
    SELECT n.tenant_id, p.lexeme, n.chunk_id, n.corpus_id, n.document_id,
           p.count_a, p.count_b, p.count_c, p.count_d, n.bm25_length
    FROM new_rows n, public.search_lexeme_counts(n.lexemes) AS p
    ORDER BY 1, 2, 3;
    RETURN NULL;
END
$$;

CREATE FUNCTION search_postings_after_delete() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public
AS $$
BEGIN
    DELETE FROM public.search_postings p
    USING old_rows o, unnest(o.lexemes) AS u
    WHERE p.tenant_id = o.tenant_id AND p.lexeme = u.lexeme AND p.chunk_id = o.chunk_id;
    RETURN NULL;
END
$$;

-- Only rows whose postings change are rewritten: a new text, tenant, corpus or document.
CREATE FUNCTION search_postings_after_update() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public
AS $$
BEGIN
    DELETE FROM public.search_postings p
    USING old_rows o JOIN new_rows n USING (chunk_id), unnest(o.lexemes) AS u
    WHERE p.tenant_id = o.tenant_id AND p.lexeme = u.lexeme AND p.chunk_id = o.chunk_id
      AND (o.tenant_id, o.corpus_id, o.document_id, o.lexemes)
          IS DISTINCT FROM (n.tenant_id, n.corpus_id, n.document_id, n.lexemes);
    INSERT INTO public.search_postings
    SELECT n.tenant_id, p.lexeme, n.chunk_id, n.corpus_id, n.document_id,
           p.count_a, p.count_b, p.count_c, p.count_d, n.bm25_length
    FROM old_rows o JOIN new_rows n USING (chunk_id), public.search_lexeme_counts(n.lexemes) AS p
    WHERE (o.tenant_id, o.corpus_id, o.document_id, o.lexemes)
          IS DISTINCT FROM (n.tenant_id, n.corpus_id, n.document_id, n.lexemes)
    ORDER BY 1, 2, 3;
    RETURN NULL;
END
$$;

CREATE FUNCTION search_postings_after_truncate() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public
AS $$
BEGIN
    TRUNCATE public.search_postings;
    RETURN NULL;
END
$$;

CREATE TRIGGER chunks_search_postings_insert AFTER INSERT ON chunks
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION search_postings_after_insert();
CREATE TRIGGER chunks_search_postings_delete AFTER DELETE ON chunks
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION search_postings_after_delete();
CREATE TRIGGER chunks_search_postings_update AFTER UPDATE ON chunks
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION search_postings_after_update();
CREATE TRIGGER chunks_search_postings_truncate AFTER TRUNCATE ON chunks
    FOR EACH STATEMENT EXECUTE FUNCTION search_postings_after_truncate();

-- Chunks written before this migration.
INSERT INTO search_postings
SELECT c.tenant_id, p.lexeme, c.chunk_id, c.corpus_id, c.document_id,
       p.count_a, p.count_b, p.count_c, p.count_d, c.bm25_length
FROM chunks c, search_lexeme_counts(c.lexemes) AS p
ORDER BY 1, 2, 3;

GRANT SELECT ON search_postings TO knowledge_search;
