-- Per-tenant enablement and quotas (issue 19), written by ingest (UpdateTenantSettings, capability
-- platform.admin) and read per request by every service: a tenant without a row is enabled or
-- not by KNOWLEDGE_TENANTS_ENABLED_BY_DEFAULT. A NULL quota is unlimited. No foreign key to
-- tenants: an operator may configure a tenant before its first call creates it.

CREATE TABLE tenant_settings (
    tenant_id                      text PRIMARY KEY CHECK (length(tenant_id) BETWEEN 1 AND 200),
    enabled                        boolean NOT NULL,
    max_documents                  bigint CHECK (max_documents >= 0),
    max_bytes                      bigint CHECK (max_bytes >= 0),
    max_chunks                     bigint CHECK (max_chunks >= 0),
    max_embedding_tokens_per_month bigint CHECK (max_embedding_tokens_per_month >= 0),
    max_llm_cost_per_month         numeric(14, 6) CHECK (max_llm_cost_per_month >= 0),
    updated_by                     text NOT NULL DEFAULT '',
    update_time                    timestamptz NOT NULL DEFAULT now()
);

GRANT SELECT, INSERT, UPDATE ON tenant_settings TO knowledge_ingest;
GRANT SELECT ON tenant_settings TO knowledge_content_index, knowledge_embedder, knowledge_search;

-- Usage (GetUsage) and the embedding-token quota read what the embedder and search record.
GRANT SELECT ON cost_records TO knowledge_ingest;
