-- The outbox: every change another service may care about is an event row written in the SAME
-- transaction as the change (ingest's adapters.outbox.publish), so neither commits without the
-- other. Writers do not number events (that would serialise every writer of a tenant until its
-- commit): a relay (adapters.outbox.OutboxRelay, one at a time under an advisory lock, in any
-- ingest replica) gives each committed event the next number of its tenant, 1, 2, 3, ...
-- (event_heads.last_seq), in the order the events became visible. A number is only ever given to
-- a committed row, after every row numbered before it, so a watcher reading `seq > cursor` never
-- skips an event that commits late. A cursor is a seq; retention removes a prefix of the sequence.
CREATE TABLE event_heads (
    tenant_id text PRIMARY KEY REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    last_seq  bigint NOT NULL CHECK (last_seq >= 0)
);

CREATE TABLE events (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id   text NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    seq         bigint CHECK (seq > 0),  -- NULL until the relay numbers it
    event_id    uuid NOT NULL DEFAULT gen_random_uuid() UNIQUE,
    type        text NOT NULL CHECK (type ~ '^[a-z]+\.[a-z_]+$'),
    document_id bigint,
    corpus_id   bigint,
    detail      jsonb NOT NULL DEFAULT '{}',
    create_time timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE UNIQUE INDEX events_tenant_seq ON events (tenant_id, seq) WHERE seq IS NOT NULL;
CREATE INDEX events_unnumbered ON events (id) WHERE seq IS NULL;
CREATE INDEX events_create_time ON events (create_time);

-- ingest is the only writer (and the only reader: WatchEvents is its RPC).
GRANT SELECT, INSERT, UPDATE, DELETE ON event_heads, events TO knowledge_ingest;
