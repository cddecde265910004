-- Chunks have one writer: ingest. The embedder keeps anchors, cost records and embedding; its
-- old chunk-writing path (Index with kind CHUNK) is gone, so its role loses every privilege on
-- chunks and on the documents and corpora that path read.
REVOKE ALL ON chunks, documents, corpora FROM knowledge_embedder;

-- One rule for a chunk's lexemes, in the database: heading weight A, body D
-- (search_chunk_lexemes of 0005), computed on every insert and on every change of the text, so
-- no writer can store lexemes of its own that the BM25 statistics would then count.
CREATE OR REPLACE FUNCTION search_fill_lexemes() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public
AS $$
BEGIN
    NEW.lexemes := public.search_chunk_lexemes(NEW.section, NEW.content);
    RETURN NEW;
END
$$;

DROP TRIGGER chunks_fill_lexemes ON chunks;
CREATE TRIGGER chunks_fill_lexemes BEFORE INSERT OR UPDATE OF section, content, lexemes ON chunks
    FOR EACH ROW EXECUTE FUNCTION search_fill_lexemes();

-- `length` was a word count from ingest and a lexeme count from the embedder, and nothing read
-- it: BM25 measures a chunk with search_bm25_length(lexemes). One rule, so the column goes.
ALTER TABLE chunks DROP COLUMN length;
