-- The user a housekeeping entry is about (a user_behavior document's subject, the token's sub of
-- that user): pre-fetch shows such an entry to that user only. NULL for every other document.
ALTER TABLE documents ADD COLUMN subject text CHECK (subject IS NULL OR length(subject) BETWEEN 1 AND 500);
CREATE INDEX documents_subject ON documents (tenant_id, subject) WHERE subject IS NOT NULL;
