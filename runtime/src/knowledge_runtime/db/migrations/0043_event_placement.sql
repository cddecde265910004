-- Events obey reach (issue 18 with issue 16): a consumer receives only the events of corpora it
-- could read now. WatchEvents decides that at read time from the corpus's CURRENT placement
-- (joined from corpora in the read), so a rebinding or a band change applies to every event of the
-- corpus from the commit of the change on, and nothing written here can go stale while the
-- corpus exists. These columns are the placement the corpus had when the event was written, in
-- the event's own transaction; they are read only once the corpus row is gone (a deleted
-- corpus can no longer be rebound, so its `corpus.deleted` event, written by the deleting
-- transaction before the row goes, carries its final placement). NULL: the event names no
-- corpus, or was written before this migration.
ALTER TABLE events
    ADD COLUMN scope_path      text,
    ADD COLUMN confidentiality text,
    ADD COLUMN corpus_system   boolean;
