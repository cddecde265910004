"""Shared values to and from knowledge.v1 messages: the conversions of what more than one service
sends or receives."""

from __future__ import annotations

from knowledge.v1 import common_pb2

from knowledge_runtime.costs import Cost, CostItem


def cost(value: Cost) -> common_pb2.Cost:
    return common_pb2.Cost(
        amount=value.amount,
        currency=value.currency,
        input_tokens=sum(item.input_tokens for item in value.items),
        output_tokens=sum(item.output_tokens for item in value.items),
        items=[
            common_pb2.CostItem(
                model_id=item.model_id,
                operation=item.operation,
                texts=item.texts,
                input_tokens=item.input_tokens,
                output_tokens=item.output_tokens,
                amount=item.amount,
            )
            for item in value.items
        ],
    )


def cost_from_message(message: common_pb2.Cost) -> Cost:
    """The inverse of ``cost``: what a callee (the embedder) reports it spent."""
    return Cost(
        currency=message.currency or "USD",
        items=tuple(
            CostItem(
                model_id=item.model_id,
                operation=item.operation,
                texts=item.texts,
                input_tokens=item.input_tokens,
                output_tokens=item.output_tokens,
                amount=item.amount,
            )
            for item in message.items
        ),
    )
