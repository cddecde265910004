-- How sure OCR was of the text it read: the mean confidence (0-100, Tesseract's) of the words it
-- kept from a document's scanned pages or images, written with its chunks beside extractor and
-- ocr_page_count (0038). 0 where OCR read nothing, and for documents stored before this migration
-- until they are extracted again.
ALTER TABLE documents ADD COLUMN ocr_confidence double precision NOT NULL DEFAULT 0
    CHECK (ocr_confidence >= 0 AND ocr_confidence <= 100);
