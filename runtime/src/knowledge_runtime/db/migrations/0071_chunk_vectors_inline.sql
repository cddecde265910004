-- Search reads a candidate's vector from its heap row: the HNSW scan for the distance it returns,
-- an exact scan of a selective filter for every row it keeps. pgvector's type is stored EXTERNAL,
-- so a 384-dimension vector (1.5 KiB) beside a chunk's text went to the TOAST table: four buffer
-- reads per candidate instead of one. MAIN keeps the vector in the row and moves the text out
-- first (out of line only when the row cannot fit a page otherwise). Rows written before this
-- keep their layout until rewritten (VACUUM FULL or pg_repack); both layouts read the same.
ALTER TABLE chunks ALTER COLUMN embedding SET STORAGE MAIN;

-- Whether a tenant restricts any document (search skips the per-candidate access lookup for one
-- that restricts none): a lookup of this index, not a scan of the tenant's documents.
CREATE INDEX documents_restricted ON documents (tenant_id) WHERE cardinality(principals) > 0;
