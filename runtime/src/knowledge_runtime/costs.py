"""What a use case spent on models, and the row it leaves in the cost ledger: one definition for
every service that records costs (search, documents-ai; the embedder writes the same table).

Pure: no protos and no database access, so each service's domain can name these types.
knowledge_runtime.convert turns a Cost into its knowledge.v1 message.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CostItem:
    model_id: str
    operation: str  # "embed", "rerank" or "chat"
    texts: int
    input_tokens: int
    output_tokens: int = 0
    amount: float = 0.0


@dataclass(frozen=True, slots=True)
class Cost:
    items: tuple[CostItem, ...] = ()
    currency: str = "USD"

    @property
    def amount(self) -> float:
        return sum(item.amount for item in self.items)

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.items + other.items, self.currency)


# The cost ledger: one row per model call; the tenant's quotas and budgets sum it.
COST_RECORD_COLUMNS = "tenant_id, model, operation, texts, tokens, cost"
RECORD_COST = f"INSERT INTO cost_records ({COST_RECORD_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6)"


def cost_record(tenant: str, item: CostItem) -> tuple[str, str, str, int, int, float]:
    """RECORD_COST's arguments for ``item``: the ledger keeps one token count, input and output."""
    return (
        tenant,
        item.model_id,
        item.operation,
        item.texts,
        item.input_tokens + item.output_tokens,
        item.amount,
    )
