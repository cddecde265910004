-- IngestUrl's fetch as a durable stage of its job (issue 17): the request stores a job with the
-- URL to fetch and no blob or document yet; a worker fetches the page (fenced), stores its bytes
-- and only then admits it (a new document, a duplicate, or the document fetched from that URL
-- before), so the fetch survives the client going away and a restart like every other stage.
ALTER TABLE ingest_jobs ADD COLUMN fetch_url text;
