-- What extraction could not do for a document (pages unread, text cut at a limit): kept with
-- the document and reported on its job's result, so a partly read file is never silently short.
ALTER TABLE documents ADD COLUMN warnings text[] NOT NULL DEFAULT '{}';
