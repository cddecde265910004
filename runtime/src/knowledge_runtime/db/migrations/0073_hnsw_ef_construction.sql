-- The HNSW graphs are built with ef_construction 128 (pgvector's default is 64). At a million
-- chunks of the latency bench's clustered vectors, recall@10 against exact search at ef_search
-- 400 was 0.902 on a graph built at 64 and 0.993 at 128; the build took 566 s instead of 338 s
-- and a query's time did not change (bench/RESULTS.md). An index's
-- options apply to every later insert (pgvector reads ef_construction at each insert; m is fixed
-- when the graph is built) and to a rebuild: an existing graph keeps its links until
-- `REINDEX INDEX CONCURRENTLY` (docs/operations.md).
ALTER INDEX chunks_embedding_hnsw SET (ef_construction = 128);
ALTER INDEX anchors_embedding_hnsw SET (ef_construction = 128);

-- The model change's next store, built the same way.
CREATE OR REPLACE FUNCTION prepare_next_vectors(dimension integer) RETURNS void
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
        'USING hnsw ((embedding::vector(%s)) vector_cosine_ops) WITH (ef_construction = 128)', dimension);
END
$$;
