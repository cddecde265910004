"""``knowledge usage|tenants``: a tenant's usage against its quotas, and its settings."""

from __future__ import annotations

from typing import TextIO

from knowledge_cli.client import OK, Client
from knowledge_cli.rest_command import print_json

QUOTA_FIELDS = ("max_documents", "max_bytes", "max_chunks", "max_embedding_tokens_per_month", "max_llm_cost_per_month")
# (label, usage field, the quota it is read against)
USAGE_ROWS = (
    ("documents", "document_count", "max_documents"),
    ("stored bytes", "stored_bytes", "max_bytes"),
    ("chunks", "chunk_count", "max_chunks"),
    ("embedding tokens", "embedding_tokens", "max_embedding_tokens_per_month"),
    ("embedding cost", "embedding_cost", ""),
    ("LLM tokens", "llm_tokens", ""),
    ("LLM cost", "llm_cost", "max_llm_cost_per_month"),
)


def usage(client: Client, options, out: TextIO) -> int:
    usage = client.usage(options.period)
    if options.json:
        print_json(out, usage)
        return OK
    quotas = usage.get("quotas") or {}
    scope = usage.get("scope", "")
    # Without usage.admin the server counts only the token's node and below, and no spending.
    part = f" (scope {scope} and below; spending is shown only to a usage.admin token)" if scope else ""
    out.write(f"period {usage.get('period', '')}{part}\n")
    rows = [
        (label, str(usage.get(field, 0)), str(quotas.get(quota, "unlimited")) if quota else "")
        for label, field, quota in USAGE_ROWS
    ]
    width = max(len(label) for label, _, _ in rows)
    out.write(f"{'':{width}}  {'used':>14}  limit\n")
    out.writelines(f"{label:{width}}  {used:>14}  {limit}\n" for label, used, limit in rows)
    return OK


def _print_settings(out: TextIO, settings: dict) -> None:
    quotas = settings.get("quotas") or {}
    default = "" if settings.get("configured") else " (the deployment's default: never configured)"
    out.write(f"tenant {settings.get('tenant', '')}: {'enabled' if settings.get('enabled') else 'disabled'}{default}\n")
    out.writelines(f"  {quota}: {quotas.get(quota, 'unlimited')}\n" for quota in QUOTA_FIELDS)


def get_settings(client: Client, options, out: TextIO) -> int:
    settings = client.tenant_settings(options.name)
    if options.json:
        print_json(out, settings)
    else:
        _print_settings(out, settings)
    return OK


def set_settings(client: Client, options, out: TextIO) -> int:
    quotas = {quota: getattr(options, quota) for quota in QUOTA_FIELDS if getattr(options, quota) is not None}
    settings = client.put_tenant_settings(options.name, options.enabled, quotas).get("settings", {})
    if options.json:
        print_json(out, settings)
    else:
        _print_settings(out, settings)
    return OK
