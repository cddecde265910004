-- What read a document's text (issue 17): the reader, and OCR's engine with the pages it read
-- ("pypdf; OCR (tesseract 5.3.0) on pages 2, 5-7"), and how many pages OCR read; written with
-- its chunks, so GetDocument, its text and agents' context evidence can say how it was read.
-- Documents stored before this migration read '' and 0 until extracted again.
ALTER TABLE documents ADD COLUMN extractor text NOT NULL DEFAULT '',
                      ADD COLUMN ocr_page_count integer NOT NULL DEFAULT 0 CHECK (ocr_page_count >= 0);

-- A page fetched again from the same URL becomes the content of the document fetched from it
-- before (IngestUrl): found by this index.
CREATE INDEX documents_source_url ON documents (tenant_id, corpus_id, source_url) WHERE source_url IS NOT NULL;
