"""Webhooks: the tenant's events pushed to endpoints, signed, at least once and in order (WebhookService)."""
