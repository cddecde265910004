"""The decisions of an embedding-model change: when the new model's vectors may replace the
current ones, what the operator sees meanwhile, and which steps follow which.

A change re-embeds every chunk into a shadow store for the new model while search keeps reading
the current one; when the shadow is complete, the tenant's own evaluation set (BEIR layout, as
``knowledge eval`` reads it) is run on both models in the modes search uses, and the gate decides.
Pure: the figures, counts and clock come in, a decision goes out.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from knowledge_ingest.domain.events import EventType, NewEvent

# HYBRID nDCG@10 may drop by at most this (0.5 points on the 0-100 scale) for the change to swap:
# a drop smaller than that is within what the evaluation set's size can tell apart.
DEFAULT_NDCG_MARGIN = 0.005
GATED_MODE = "HYBRID"  # the mode search answers in by default: the one the gate protects
MODES = ("VECTOR", "LEXICAL", "HYBRID")


class ChangeState(enum.Enum):
    RE_EMBEDDING = "re_embedding"  # the shadow is being filled; search reads the current model
    EVALUATING = "evaluating"  # the shadow is complete; the evaluation set runs on both
    HELD = "held"  # the gate said no (or there is no set and no --force): the current model stays
    SWAPPED = "swapped"  # search reads the new model; the old vectors are kept for a rollback
    ROLLED_BACK = "rolled_back"  # search reads the old model again; the change is over
    FINISHED = "finished"  # the old vectors were dropped: no rollback any more
    CANCELLED = "cancelled"  # stopped before the swap; the shadow is dropped


# What may follow what; anything else is refused as a wrong state (FAILED_PRECONDITION).
_NEXT: dict[ChangeState, frozenset[ChangeState]] = {
    ChangeState.RE_EMBEDDING: frozenset({ChangeState.EVALUATING, ChangeState.CANCELLED}),
    ChangeState.EVALUATING: frozenset({ChangeState.SWAPPED, ChangeState.HELD, ChangeState.CANCELLED}),
    ChangeState.HELD: frozenset({ChangeState.SWAPPED, ChangeState.EVALUATING, ChangeState.CANCELLED}),
    ChangeState.SWAPPED: frozenset({ChangeState.ROLLED_BACK, ChangeState.FINISHED}),
    ChangeState.ROLLED_BACK: frozenset(),
    ChangeState.FINISHED: frozenset(),
    ChangeState.CANCELLED: frozenset(),
}


def may_follow(current: ChangeState, target: ChangeState) -> bool:
    return target in _NEXT[current]


@dataclass(frozen=True, slots=True)
class ModeFigures:
    ndcg_at_10: float
    recall_at_100: float


@dataclass(frozen=True, slots=True)
class Figures:
    """One model's evaluation, per search mode."""

    modes: dict[str, ModeFigures]

    def ndcg(self, mode: str = GATED_MODE) -> float:
        return self.modes[mode].ndcg_at_10


@dataclass(frozen=True, slots=True)
class GateDecision:
    swap: bool
    forced: bool  # swapped on the operator's --force: recorded with the change
    why: str  # what the operator reads beside the figures


def gate(
    current: Figures | None,
    candidate: Figures | None,
    *,
    margin: float = DEFAULT_NDCG_MARGIN,
    force: bool = False,
) -> GateDecision:
    """Swap when the candidate's HYBRID nDCG@10 is no worse than the current one's by more than
    ``margin``; a tenant without an evaluation set (no figures) swaps only on ``force``, and
    ``force`` overrides a failed gate, both recorded as forced."""
    if margin < 0:
        raise ValueError("margin must not be negative")
    if current is None or candidate is None:
        if force:
            return GateDecision(swap=True, forced=True, why="no evaluation set; swapped on --force")
        return GateDecision(swap=False, forced=False, why="no evaluation set: swap only with --force")
    drop = current.ndcg() - candidate.ndcg()
    if drop <= margin + 1e-12:  # a float's last bit never decides
        return GateDecision(
            swap=True, forced=False, why=f"{GATED_MODE} nDCG@10 {current.ndcg():.4f} -> {candidate.ndcg():.4f}"
        )
    why = (
        f"{GATED_MODE} nDCG@10 would drop from {current.ndcg():.4f} to {candidate.ndcg():.4f}, "
        f"more than the margin {margin:.4f}"
    )
    if force:
        return GateDecision(swap=True, forced=True, why=why + "; swapped on --force")
    return GateDecision(swap=False, forced=False, why=why)


@dataclass(frozen=True, slots=True)
class Progress:
    done: int
    total: int
    per_s: float  # chunks re-embedded per second so far
    eta_s: float | None  # None until there is a rate to tell it by

    @property
    def complete(self) -> bool:
        return self.done >= self.total


def progress(done: int, total: int, elapsed_s: float) -> Progress:
    """k/n chunks, the rate and the time left at that rate. ``total`` is the chunks to re-embed
    when the change started plus those written since (new documents are embedded by both)."""
    if done < 0 or total < 0 or done > total:
        raise ValueError(f"progress {done}/{total} is impossible")
    per_s = done / elapsed_s if elapsed_s > 0 else 0.0
    eta = (total - done) / per_s if per_s > 0 else (0.0 if done == total else None)
    return Progress(done=done, total=total, per_s=per_s, eta_s=eta)


def may_drop_old(state: ChangeState, swapped_at: float, now: float, grace_s: float) -> bool:
    """The old vectors go only after a swap and its grace period: until then a rollback restores
    them exactly."""
    return state is ChangeState.SWAPPED and now - swapped_at >= grace_s


# The two vector stores: the chunks.embedding column (the database's own dimension) and the
# chunk_vectors_next table (any dimension). A change fills the one search does not read.
CHUNKS_STORE = "chunks"
NEXT_STORE = "next"
OPEN_STATES = frozenset({ChangeState.RE_EMBEDDING, ChangeState.EVALUATING, ChangeState.HELD, ChangeState.SWAPPED})


def other_store(store: str) -> str:
    return NEXT_STORE if store == CHUNKS_STORE else CHUNKS_STORE


@dataclass(frozen=True, slots=True)
class Stores:
    """Which store search reads, and which model each store holds ('' = the embedder's current
    model; None = empty, not written)."""

    current: str
    chunks_model: str | None
    next_model: str | None

    def model_of(self, store: str) -> str | None:
        return self.chunks_model if store == CHUNKS_STORE else self.next_model

    def live(self) -> dict[str, str]:
        """The stores every new chunk is written to, with the model of each."""
        held = {CHUNKS_STORE: self.chunks_model, NEXT_STORE: self.next_model}
        return {store: model for store, model in held.items() if model is not None}


@dataclass(frozen=True, slots=True)
class ModelChange:
    change_id: int
    from_model: str
    from_store: str
    to_model: str
    to_store: str
    to_dimension: int
    state: ChangeState
    chunks_done: int
    forced: bool
    gate_why: str
    current_figures: Figures | None
    candidate_figures: Figures | None
    create_time: float  # epoch seconds
    swap_time: float | None
    end_time: float | None
    tenant: str | None = None  # the operator's who started it: its events are that tenant's

    @property
    def open(self) -> bool:
        return self.state in OPEN_STATES


def figures_record(current: Figures | None, candidate: Figures | None) -> dict[str, Any] | None:
    """Both models' figures as they are stored with the change and sent in its events."""
    if current is None and candidate is None:
        return None

    def one(figures: Figures | None) -> dict[str, dict[str, float]] | None:
        if figures is None:
            return None
        return {m: {"ndcg_at_10": f.ndcg_at_10, "recall_at_100": f.recall_at_100} for m, f in figures.modes.items()}

    return {"current": one(current), "candidate": one(candidate)}


# The event a change's arrival in a state sends: the gate's two outcomes are one event, its state
# telling them apart; HELD -> EVALUATING (never written by the service) sends none.
_EVENTS = {
    ChangeState.RE_EMBEDDING: EventType.MODEL_CHANGE_STARTED,
    ChangeState.EVALUATING: EventType.MODEL_CHANGE_RE_EMBEDDED,
    ChangeState.SWAPPED: EventType.MODEL_CHANGE_GATED,
    ChangeState.HELD: EventType.MODEL_CHANGE_GATED,
    ChangeState.ROLLED_BACK: EventType.MODEL_CHANGE_ROLLED_BACK,
    ChangeState.CANCELLED: EventType.MODEL_CHANGE_CANCELLED,
    ChangeState.FINISHED: EventType.MODEL_CHANGE_FINISHED,
}


def change_event(change: ModelChange) -> NewEvent:
    """The event of ``change`` having just reached its state: the change as it is then."""
    detail: dict[str, Any] = {
        "change_id": str(change.change_id),
        "from_model": change.from_model,
        "to_model": change.to_model,
        "state": change.state.value,
    }
    if _EVENTS[change.state] is EventType.MODEL_CHANGE_GATED:
        detail |= {
            "forced": change.forced,
            "reason": change.gate_why,
            "figures": figures_record(change.current_figures, change.candidate_figures),
        }
    return NewEvent(_EVENTS[change.state], None, None, detail)


def start_target(stores: Stores, to_model: str, current_model: str) -> str | None:
    """The store a change to ``to_model`` fills; None when search reads that model already
    (``current_model``: the embedder's, which '' stands for)."""
    reading = stores.model_of(stores.current) or current_model
    if to_model == reading:
        return None
    return other_store(stores.current)
