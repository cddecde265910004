"""A tenant's enablement, quotas and usage, and the per-tenant metrics (TenantService)."""
