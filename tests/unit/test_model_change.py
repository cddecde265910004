"""The decisions of an embedding-model change: the evaluation gate, the states, the progress and
when the old vectors may go."""

from __future__ import annotations

import pytest
from knowledge_ingest.domain.model_change import (
    DEFAULT_NDCG_MARGIN,
    ChangeState,
    Figures,
    ModeFigures,
    gate,
    may_drop_old,
    may_follow,
    progress,
)


def figures(hybrid: float, vector: float = 0.5, lexical: float = 0.4) -> Figures:
    return Figures(
        modes={
            "VECTOR": ModeFigures(vector, 0.9),
            "LEXICAL": ModeFigures(lexical, 0.8),
            "HYBRID": ModeFigures(hybrid, 0.95),
        }
    )


def test_a_better_or_equal_model_swaps():
    assert gate(figures(0.60), figures(0.65)).swap
    assert gate(figures(0.60), figures(0.60)).swap


def test_a_drop_within_the_margin_swaps_and_one_beyond_it_is_held_with_the_figures():
    assert DEFAULT_NDCG_MARGIN == 0.005  # half a point of nDCG@10
    assert gate(figures(0.600), figures(0.595)).swap  # exactly the margin
    held = gate(figures(0.600), figures(0.594))
    assert not held.swap and not held.forced
    assert "0.6000" in held.why and "0.5940" in held.why


def test_only_hybrid_decides():
    assert gate(figures(0.60, vector=0.9), figures(0.60, vector=0.1)).swap
    assert not gate(figures(0.60, vector=0.1), figures(0.50, vector=0.9)).swap


def test_without_an_evaluation_set_only_force_swaps_and_force_is_recorded():
    assert not gate(None, None).swap
    forced = gate(None, None, force=True)
    assert forced.swap and forced.forced
    overridden = gate(figures(0.6), figures(0.3), force=True)
    assert overridden.swap and overridden.forced and "--force" in overridden.why
    assert not gate(figures(0.6), figures(0.7), force=True).forced  # passed on its own


def test_a_negative_margin_is_refused():
    with pytest.raises(ValueError):
        gate(figures(0.6), figures(0.6), margin=-0.1)


def test_the_states_follow_the_lifecycle_only():
    assert may_follow(ChangeState.RE_EMBEDDING, ChangeState.EVALUATING)
    assert not may_follow(ChangeState.RE_EMBEDDING, ChangeState.SWAPPED)  # never before the gate
    assert may_follow(ChangeState.HELD, ChangeState.SWAPPED)  # the operator's --force
    assert may_follow(ChangeState.SWAPPED, ChangeState.ROLLED_BACK)
    assert not may_follow(ChangeState.FINISHED, ChangeState.ROLLED_BACK)  # old vectors gone
    assert not may_follow(ChangeState.ROLLED_BACK, ChangeState.SWAPPED)


def test_progress_tells_the_rate_and_time_left_honestly():
    started = progress(0, 100, 0.0)
    assert (started.per_s, started.eta_s, started.complete) == (0.0, None, False)
    half = progress(50, 100, 10.0)
    assert (half.per_s, half.eta_s) == (5.0, 10.0)
    assert progress(100, 100, 20.0).complete
    assert progress(0, 0, 0.0).complete and progress(0, 0, 0.0).eta_s == 0.0
    with pytest.raises(ValueError):
        progress(101, 100, 1.0)


def test_old_vectors_go_only_after_a_swap_and_its_grace():
    assert not may_drop_old(ChangeState.SWAPPED, swapped_at=100.0, now=150.0, grace_s=60.0)
    assert may_drop_old(ChangeState.SWAPPED, swapped_at=100.0, now=160.0, grace_s=60.0)
    assert not may_drop_old(ChangeState.HELD, swapped_at=0.0, now=1e9, grace_s=0.0)
