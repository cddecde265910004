-- The outbox: every change another service may care about is an event row written in the SAME
-- transaction as the change (ingest's adapters.outbox.publish, the last statement of that
-- transaction). A tenant's events are numbered 1, 2, 3, ... by event_heads.last_seq, which the
-- publishing transaction increments and so holds locked until it commits: the next publisher of
-- that tenant waits, so seq order is commit order and a reader that sees seq n has already been
-- able to see every seq below it. A cursor is a seq; retention removes a prefix of the sequence.
CREATE TABLE event_heads (
    tenant_id text PRIMARY KEY REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    last_seq  bigint NOT NULL CHECK (last_seq >= 0)
);

CREATE TABLE events (
    tenant_id   text NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    seq         bigint NOT NULL CHECK (seq > 0),
    event_id    uuid NOT NULL DEFAULT gen_random_uuid() UNIQUE,
    type        text NOT NULL CHECK (type ~ '^[a-z]+\.[a-z_]+$'),
    document_id bigint,
    corpus_id   bigint,
    detail      jsonb NOT NULL DEFAULT '{}',
    create_time timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (tenant_id, seq)
);
CREATE INDEX events_create_time ON events (create_time);

-- ingest is the only writer (and the only reader: WatchEvents is its RPC).
GRANT SELECT, INSERT, UPDATE, DELETE ON event_heads, events TO knowledge_ingest;
