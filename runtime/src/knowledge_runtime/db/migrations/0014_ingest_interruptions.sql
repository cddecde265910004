-- Interruptions are counted apart from attempts: a claim of a job whose lease expired (its worker
-- stopped) or a job put back because a service it needs was starting or restarting is not the
-- job's failure, so it spends no attempt; it counts here, bounded by KNOWLEDGE_INGEST_MAX_INTERRUPTIONS.
ALTER TABLE ingest_jobs ADD COLUMN interruptions integer NOT NULL DEFAULT 0 CHECK (interruptions >= 0);
