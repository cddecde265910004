-- Search: each chunk's BM25 length, stored.
--
-- The lexical channel computed search_bm25_length(lexemes) (an unnest of the whole tsvector) for
-- every (candidate, query term) row it scored: EXPLAIN ANALYZE of a slow SciFact claim showed
-- 3,533 such rows taking 840 of its 1,330 ms. A stored generated column is computed once when a
-- chunk is written, by whichever role writes it (after the BEFORE trigger that fills empty
-- lexemes), with the very function the tenant statistics use, so the two never disagree.
ALTER TABLE chunks
    ADD COLUMN bm25_length integer NOT NULL GENERATED ALWAYS AS (search_bm25_length(lexemes)) STORED;
