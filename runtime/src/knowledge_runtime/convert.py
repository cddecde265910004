"""Shared values to and from knowledge.v1 messages: the conversions of what more than one service
sends or receives."""

from __future__ import annotations

from knowledge.v1 import common_pb2

from knowledge_runtime.costs import Cost, CostItem

# A cost item's fields, named alike in the message and in ``CostItem``: copied by name both ways.
_ITEM_FIELDS = ("model_id", "operation", "texts", "input_tokens", "output_tokens", "amount")


def _item_fields(item: CostItem | common_pb2.CostItem) -> dict:
    return {name: getattr(item, name) for name in _ITEM_FIELDS}


def cost(value: Cost) -> common_pb2.Cost:
    return common_pb2.Cost(
        amount=value.amount,
        currency=value.currency,
        input_tokens=sum(item.input_tokens for item in value.items),
        output_tokens=sum(item.output_tokens for item in value.items),
        items=[common_pb2.CostItem(**_item_fields(item)) for item in value.items],
    )


def cost_from_message(message: common_pb2.Cost) -> Cost:
    """The inverse of ``cost``: what a callee (the embedder) reports it spent."""
    return Cost(
        currency=message.currency or "USD",
        items=tuple(CostItem(**_item_fields(item)) for item in message.items),
    )
