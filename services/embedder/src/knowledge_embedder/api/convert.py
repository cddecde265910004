"""Domain values to and from knowledge.v1 messages."""

from __future__ import annotations

import numpy as np
from knowledge.v1 import common_pb2, embedder_pb2

from knowledge_embedder.domain.errors import InvalidInput
from knowledge_embedder.domain.model import AnchorMatch, AnchorTarget, CostLine


def vector(row: np.ndarray) -> common_pb2.Vector:
    return common_pb2.Vector(values=row.tolist())


def cost(line: CostLine) -> common_pb2.Cost:
    item = common_pb2.CostItem(
        model_id=line.model, operation=line.operation, texts=line.texts, input_tokens=line.tokens, amount=line.amount
    )
    return common_pb2.Cost(amount=line.amount, currency=line.currency, input_tokens=line.tokens, items=[item])


def anchor_target(message: embedder_pb2.AnchorTarget, field: str) -> AnchorTarget:
    try:
        return AnchorTarget.parse(message.entity_type, message.entity_id)
    except InvalidInput as error:
        raise InvalidInput(f"{field}.{error.message}", field=f"{field}.{error.metadata['field']}") from None


def anchor_match(match: AnchorMatch) -> embedder_pb2.AnchorMatch:
    target = embedder_pb2.AnchorTarget(entity_type=match.target.entity_type, entity_id=match.target.entity_id)
    return embedder_pb2.AnchorMatch(target=target, score=match.score)
