"""What a tenant may hold: the operator's quotas checked, and the decisions at each checkpoint of an
upload and a job. Pure: each answers the :class:`Refused` to raise, or None, so that the upload
path, the job steps and the answer path cannot disagree about what "over quota" means."""

from __future__ import annotations

import re
from decimal import Decimal

from knowledge_runtime.errors import InvalidField
from knowledge_runtime.refusals import Refusal, Refused
from knowledge_runtime.tenancy import Holdings, Quotas

MAX_TENANT_CHARS = 200
MAX_LLM_BUDGET = 99_999_999  # what tenant_settings.max_llm_cost_per_month (numeric(14, 6)) holds, in whole units
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def check_tenant(tenant: str) -> str:
    """A tenant identifier an operator names (the tokens' tenant claim, as auth reads it)."""
    name = tenant.strip()
    if not name or len(name) > MAX_TENANT_CHARS or _CONTROL.search(name):
        raise InvalidField("tenant", f"tenant must be 1..{MAX_TENANT_CHARS} characters without control characters")
    return name


def check_quotas(quotas: Quotas) -> Quotas:
    for name in ("max_documents", "max_bytes", "max_chunks", "max_embedding_tokens_per_month"):
        value = getattr(quotas, name)
        if value is not None and value < 0:
            raise InvalidField(f"quotas.{name}", f"quotas.{name} must not be negative")
    cost = quotas.max_llm_cost_per_month
    if cost is not None and (not cost.is_finite() or cost < 0 or cost > MAX_LLM_BUDGET):
        raise InvalidField("quotas.max_llm_cost_per_month", "quotas.max_llm_cost_per_month must be 0..99999999")
    return quotas


def _exhausted(what: str, used: int | Decimal, limit: int | Decimal) -> Refused:
    return Refused(
        Refusal.QUOTA_EXHAUSTED,
        f"the tenant's {what} quota is used up ({used} of {limit})",
        metadata={"quota": what, "used": str(used), "limit": str(limit)},
    )


def upload_refusal(quotas: Quotas, held: Holdings, adding_bytes: int = 0) -> Refused | None:
    """A new document of ``adding_bytes`` (0 while its size is not known yet): refused when the
    tenant already holds its maximum of documents, or the bytes would go over its maximum."""
    if quotas.max_documents is not None and held.documents >= quotas.max_documents:
        return _exhausted("max_documents", held.documents, quotas.max_documents)
    if quotas.max_bytes is not None and (
        held.bytes + adding_bytes > quotas.max_bytes or (adding_bytes == 0 and held.bytes >= quotas.max_bytes)
    ):
        return _exhausted("max_bytes", held.bytes, quotas.max_bytes)
    return None


def embedding_refusal(quotas: Quotas, held: Holdings, adding_chunks: int) -> Refused | None:
    """Before a document's chunks are embedded: its chunks must fit, and the month's embedding
    tokens must not be spent already."""
    if quotas.max_chunks is not None and held.chunks + adding_chunks > quotas.max_chunks:
        return _exhausted("max_chunks", held.chunks, quotas.max_chunks)
    limit = quotas.max_embedding_tokens_per_month
    if limit is not None and held.embedding_tokens >= limit:
        return _exhausted("max_embedding_tokens_per_month", held.embedding_tokens, limit)
    return None


def index_refusal(
    quotas: Quotas, held: Holdings, *, new_document: bool, adding_bytes: int, adding_chunks: int
) -> Refused | None:
    """A version of passages (IndexPassages, and what CheckIndexing answers): an upload's decision
    when it makes a new document, only its bytes when it is a new version of one the tenant holds
    (``held`` then leaves that document's chunks out: they are replaced), then an embedding's."""
    if new_document:
        refusal = upload_refusal(quotas, held, adding_bytes)
    elif quotas.max_bytes is not None and held.bytes + adding_bytes > quotas.max_bytes:
        refusal = _exhausted("max_bytes", held.bytes, quotas.max_bytes)
    else:
        refusal = None
    return refusal or embedding_refusal(quotas, held, adding_chunks)
