-- Changing the embedding model: a second vector store beside chunks.embedding, the record of
-- which store and model search reads, and the changes themselves.
--
-- Two stores: 'chunks' (the chunks.embedding column, of the dimension the database was made for)
-- and 'next' (chunk_vectors_next, a vector of any dimension: its HNSW index is made for the
-- change's model when the change starts, on the expression embedding::vector(D), which search's
-- SQL names). A change fills the store search does not read; the swap flips which one it reads.
-- The record is per deployment: the embedder holds the models for every tenant, and vectors of
-- two models are never comparable, so every tenant reads the same model at any moment.

-- A store dropped after a change (its vectors set to NULL) is written NULL until a later change
-- fills it again.
ALTER TABLE chunks ALTER COLUMN embedding DROP NOT NULL;

CREATE TABLE chunk_vectors_next (
    chunk_id  bigint PRIMARY KEY REFERENCES chunks (chunk_id) ON DELETE CASCADE,
    embedding vector NOT NULL
);

-- The one row: which store and model search reads now, and which model each store holds
-- ('' = the embedder's configured model; NULL = the store is empty and not written).
CREATE TABLE embedding_stores (
    singleton     boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    current_store text NOT NULL DEFAULT 'chunks' CHECK (current_store IN ('chunks', 'next')),
    chunks_model  text DEFAULT '',
    next_model    text,
    next_dimension integer CHECK (next_dimension BETWEEN 1 AND 16000),
    update_time   timestamptz NOT NULL DEFAULT now(),
    CHECK (current_store <> 'next' OR next_model IS NOT NULL),
    CHECK (current_store <> 'chunks' OR chunks_model IS NOT NULL)
);
INSERT INTO embedding_stores DEFAULT VALUES;

CREATE TABLE model_changes (
    change_id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    from_model    text NOT NULL,
    from_store    text NOT NULL CHECK (from_store IN ('chunks', 'next')),
    to_model      text NOT NULL,
    to_store      text NOT NULL CHECK (to_store IN ('chunks', 'next') AND to_store <> from_store),
    to_dimension  integer NOT NULL CHECK (to_dimension BETWEEN 1 AND 16000),
    state         text NOT NULL
        CHECK (state IN ('re_embedding', 'evaluating', 'held', 'swapped', 'rolled_back', 'finished', 'cancelled')),
    requested_by  text NOT NULL DEFAULT '',
    chunks_done   bigint NOT NULL DEFAULT 0 CHECK (chunks_done >= 0),  -- re-embedded by the change's loop
    -- The re-embedding loop's place: every chunk up to it has the new vector. Advanced in the
    -- transaction that writes the vectors, so a restart resumes there and counts nothing twice.
    cursor_chunk_id bigint NOT NULL DEFAULT 0,
    forced        boolean NOT NULL DEFAULT false,
    gate_why      text NOT NULL DEFAULT '',
    figures       jsonb,  -- {"current": {mode: {ndcg_at_10, recall_at_100}}, "candidate": {...}}
    create_time   timestamptz NOT NULL DEFAULT now(),
    update_time   timestamptz NOT NULL DEFAULT now(),
    swap_time     timestamptz,
    end_time      timestamptz
);
-- At most one change is open at a time.
CREATE UNIQUE INDEX model_changes_one_open ON model_changes ((true))
    WHERE state IN ('re_embedding', 'evaluating', 'held', 'swapped');

-- The next store made ready for a model of `dimension`: emptied, and its HNSW index made for that
-- dimension. A definer function: ingest writes the table but does not own it.
CREATE FUNCTION prepare_next_vectors(dimension integer) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public
AS $$
BEGIN
    IF dimension < 1 OR dimension > 16000 THEN
        RAISE EXCEPTION 'dimension % out of range', dimension;
    END IF;
    TRUNCATE public.chunk_vectors_next;
    DROP INDEX IF EXISTS public.chunk_vectors_next_hnsw;
    EXECUTE format(
        'CREATE INDEX chunk_vectors_next_hnsw ON public.chunk_vectors_next '
        'USING hnsw ((embedding::vector(%s)) vector_cosine_ops)', dimension);
END
$$;

-- The next store's vectors dropped (after a rollback, a cancel, or a swap back's grace period).
CREATE FUNCTION drop_next_vectors() RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public
AS $$
BEGIN
    TRUNCATE public.chunk_vectors_next;
    DROP INDEX IF EXISTS public.chunk_vectors_next_hnsw;
END
$$;

REVOKE ALL ON FUNCTION prepare_next_vectors(integer), drop_next_vectors() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION prepare_next_vectors(integer), drop_next_vectors() TO knowledge_ingest;
GRANT SELECT, INSERT, UPDATE, DELETE ON chunk_vectors_next, embedding_stores, model_changes TO knowledge_ingest;
GRANT SELECT ON chunk_vectors_next, embedding_stores TO knowledge_search;
