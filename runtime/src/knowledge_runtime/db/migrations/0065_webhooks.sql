-- Webhooks: the tenant's events pushed to endpoints, signed (ingest's webhooks/ package).
--
-- A webhook reads the events as the token that registered it would: its scope node, clearance,
-- subject, capabilities and principals are kept, and every event is judged by the same rule as
-- WatchEvents when it is delivered. `cursor` is the seq of the last event acknowledged (or not
-- for it); the next one is not sent before that one is, so an endpoint sees its events in order.
--
-- Any number of ingest replicas deliver: a replica leases a webhook (lease_owner,
-- lease_expire_time) before sending anything to it, and every write it makes afterwards names its
-- lease and the webhook's `version`, which every change through the API bumps; a replica whose
-- lease expired or whose webhook changed under it writes nothing and stops. The lease outlives a
-- delivery's timeout, so two replicas never send to one endpoint at once.
--
-- The signing secrets are stored sealed (AES-256-GCM under KNOWLEDGE_WEBHOOK_KEY_PATH, a key that
-- is not in the database; the tenant and URL are its associated data), so a copy of the database
-- or of its backups holds no usable secret. ingest alone reads and writes these tables.
CREATE TABLE webhooks (
    webhook_id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id             text NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    url                   text NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
    event_types           text[] NOT NULL DEFAULT '{}',  -- empty: every type
    description           text NOT NULL DEFAULT '' CHECK (length(description) <= 500),
    -- the registering token: what it could read is what the webhook is sent
    scope_path            text NOT NULL,
    clearance             text NOT NULL,
    created_by            text NOT NULL DEFAULT '',
    capabilities          text[] NOT NULL DEFAULT '{}',
    principals            text[] NOT NULL DEFAULT '{}',
    secret_sealed         text NOT NULL,
    previous_secret_sealed text,
    previous_secret_expire_time timestamptz,
    state                 text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'paused', 'disabled')),
    disabled_reason       text NOT NULL DEFAULT '',
    cursor                bigint NOT NULL CHECK (cursor >= 0),
    -- the event after the cursor: failed attempts at it, when the next is due, since when failing
    failed_attempts       integer NOT NULL DEFAULT 0,
    next_attempt_time     timestamptz NOT NULL DEFAULT now(),
    failing_since         timestamptz,
    lease_owner           uuid,
    lease_expire_time     timestamptz,
    version               bigint NOT NULL DEFAULT 1,
    create_time           timestamptz NOT NULL DEFAULT now(),
    update_time           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhooks_tenant ON webhooks (tenant_id, webhook_id);
-- What a deliverer claims: the active webhooks whose next attempt is due.
CREATE INDEX webhooks_due ON webhooks (next_attempt_time) WHERE state = 'active';

-- One row per attempt to deliver an event (ListWebhookDeliveries); kept as long as events are.
CREATE TABLE webhook_deliveries (
    delivery_id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    webhook_id    bigint NOT NULL REFERENCES webhooks (webhook_id) ON DELETE CASCADE,
    event_id      uuid NOT NULL,
    event_seq     bigint NOT NULL,
    event_type    text NOT NULL,
    attempt       integer NOT NULL CHECK (attempt >= 1),
    attempt_time  timestamptz NOT NULL DEFAULT now(),
    status_code   integer NOT NULL DEFAULT 0,  -- 0: no answer
    latency_ms    integer NOT NULL DEFAULT 0,
    delivered     boolean NOT NULL,
    error         text NOT NULL DEFAULT ''
);
CREATE INDEX webhook_deliveries_list ON webhook_deliveries (webhook_id, delivery_id DESC);
CREATE INDEX webhook_deliveries_time ON webhook_deliveries (attempt_time);

GRANT SELECT, INSERT, UPDATE, DELETE ON webhooks, webhook_deliveries TO knowledge_ingest;
