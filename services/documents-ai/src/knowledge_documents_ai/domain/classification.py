"""Classification by embedding: a document against its tenant's type anchors, no LLM needed.

Similarities (cosine of the document's vector to each type's anchor) become probabilities by a
temperature-scaled softmax that includes a "none of these" candidate at ``floor``: a document
that fits every type poorly puts most of the mass on none of them, so its confidence is low and
processing proposes a new type instead of forcing one. The two parameters are settings; their
defaults are a starting point for MiniLM-sized models, not a fit on labelled data.

When an LLM is configured it decides among the top candidates (:func:`llm_choice`); its answer
is accepted only when it names one of them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from knowledge_documents_ai.domain.limits import UNCLASSIFIED

DEFAULT_TEMPERATURE = 0.05
DEFAULT_FLOOR = 0.25  # a cosine below this is "not this type" for all-MiniLM-L6-v2-like models
DEFAULT_ALTERNATIVES = 3
EVIDENCE_CHUNKS = 3


@dataclass(frozen=True, slots=True)
class Calibration:
    temperature: float = DEFAULT_TEMPERATURE
    floor: float = DEFAULT_FLOOR

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise ValueError("temperature must be > 0")


@dataclass(frozen=True, slots=True)
class Candidate:
    type_name: str
    similarity: float
    probability: float


@dataclass(frozen=True, slots=True)
class ChunkEvidence:
    chunk_id: int
    similarity: float


@dataclass(frozen=True, slots=True)
class Classification:
    type_name: str  # UNCLASSIFIED when no type is more likely than none
    confidence: float
    similarity: float  # the chosen type's cosine (the floor for UNCLASSIFIED)
    alternatives: tuple[Candidate, ...]  # the other candidates, most likely first
    evidence: tuple[ChunkEvidence, ...] = ()
    decided_by: str = "embedding"  # or "llm"

    @property
    def classified(self) -> bool:
        return self.type_name != UNCLASSIFIED


def calibrate(similarities: Mapping[str, float], calibration: Calibration = Calibration()) -> list[Candidate]:
    """Every type and the "none" candidate with its probability, most likely first (ties by name)."""
    scores = dict(similarities)
    scores[UNCLASSIFIED] = calibration.floor
    top = max(scores.values())
    weights = {name: math.exp((s - top) / calibration.temperature) for name, s in scores.items()}
    total = sum(weights.values())
    candidates = [Candidate(name, similarities.get(name, calibration.floor), weights[name] / total) for name in scores]
    return sorted(candidates, key=lambda c: (-c.probability, c.type_name))


def classify(
    similarities: Mapping[str, float],
    chunk_similarities: Mapping[str, Sequence[tuple[int, float]]] | None = None,
    calibration: Calibration = Calibration(),
    alternatives: int = DEFAULT_ALTERNATIVES,
) -> Classification:
    """The most likely type (or UNCLASSIFIED), its confidence, the next ``alternatives`` and the
    chunks most like the chosen type (``chunk_similarities[type]``: (chunk_id, cosine) pairs)."""
    ranked = calibrate(similarities, calibration)
    best = ranked[0]
    return Classification(
        type_name=best.type_name,
        confidence=best.probability,
        similarity=best.similarity,
        alternatives=tuple(ranked[1 : 1 + alternatives]),
        evidence=evidence_for(best.type_name, chunk_similarities),
    )


def evidence_for(
    type_name: str, chunk_similarities: Mapping[str, Sequence[tuple[int, float]]] | None
) -> tuple[ChunkEvidence, ...]:
    """The chunks most like ``type_name``'s anchor, best first (ties by chunk id)."""
    if not chunk_similarities or type_name not in chunk_similarities:
        return ()
    pairs = sorted(chunk_similarities[type_name], key=lambda p: (-p[1], p[0]))[:EVIDENCE_CHUNKS]
    return tuple(ChunkEvidence(chunk_id, similarity) for chunk_id, similarity in pairs)


def llm_choice(
    embedding: Classification,
    answer: str,
    chunk_similarities: Mapping[str, Sequence[tuple[int, float]]] | None = None,
) -> Classification | None:
    """The LLM's decision among the embedding's candidates: the candidate it names (case and
    surrounding punctuation ignored), or None when it names none of them (the caller keeps the
    embedding's answer and says the model's was refused). Its confidence stays the calibrated
    probability of the chosen candidate: a model's say-so is not a probability."""
    named = answer.strip().strip(".\"'`").strip().lower()
    candidates = [
        Candidate(embedding.type_name, embedding.similarity, embedding.confidence),
        *embedding.alternatives,
    ]
    for candidate in candidates:
        if candidate.type_name == named:
            return Classification(
                type_name=named,
                confidence=candidate.probability,
                similarity=candidate.similarity,
                alternatives=tuple(c for c in candidates if c.type_name != named),
                evidence=evidence_for(named, chunk_similarities),
                decided_by="llm",
            )
    return None
