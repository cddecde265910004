"""Shared values to knowledge.v1 messages: the conversions more than one service's API makes."""

from __future__ import annotations

from knowledge.v1 import common_pb2

from knowledge_runtime.costs import Cost


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
