"""The batch queue alone, with fake callers: no runner, no threads, no event loop. Which inputs
form each batch: the token budget, interactive first within the burst bound, packing by length,
callers that went away, admission per priority."""

import pytest
from knowledge_embedder import metrics
from knowledge_embedder.batching.queue import PACK_WINDOW, BatchQueue, Pending, Priority
from knowledge_embedder.domain.errors import EmbedderStopping, QueueFull
from knowledge_embedder.domain.model import RerankPair, TextInput
from prometheus_client import REGISTRY


class FakeCaller:
    """Someone waiting for one input's result; ``leave()`` is its RPC being cancelled."""

    def __init__(self) -> None:
        self.gone = False

    def done(self) -> bool:
        return self.gone

    def leave(self) -> None:
        self.gone = True


def open_queue(**settings: int) -> BatchQueue[FakeCaller]:
    queue: BatchQueue[FakeCaller] = BatchQueue(**{"max_batch_tokens": 100, "max_queue": 1000, **settings})
    queue.open()
    return queue


def admit(
    queue: BatchQueue[FakeCaller], tokens: list[int], *, priority: Priority = Priority.BULK, name: str = "t"
) -> list[Pending[FakeCaller]]:
    """One call of ``len(tokens)`` texts, named ``<name><tokens>`` (e.g. ``t300``)."""
    inputs = [TextInput(f"{name}{count}") for count in tokens]
    return queue.admit(priority, inputs, tokens, [FakeCaller() for _ in tokens])


def names(batch: list[Pending[FakeCaller]]) -> list[str]:
    return [entry.input.text if isinstance(entry.input, TextInput) else entry.input.passage for entry in batch]


def drain(queue: BatchQueue[FakeCaller]) -> list[list[str]]:
    """Every batch the queue forms until nothing is left."""
    batches = []
    while not queue.empty:
        batch = queue.next_batch()
        if batch:
            batches.append(names(batch))
    return batches


def skipped() -> float:
    return REGISTRY.get_sample_value("knowledge_embedder_skipped_inputs_total") or 0


def rejected() -> float:
    return REGISTRY.get_sample_value("knowledge_embedder_rejected_inputs_total") or 0


# -- batches by the token budget ------------------------------------------------------------------


def test_a_batch_takes_inputs_in_arrival_order_while_they_fit_the_budget_longest_first():
    queue = open_queue(max_batch_tokens=10)
    admit(queue, [3, 1, 4, 2, 5, 6], priority=Priority.INTERACTIVE)
    assert queue.depth == 6
    first = queue.next_batch()
    # 3 + 1 + 4 + 2 = 10 fits, + 5 does not: arrival decides who is in, length the order inside.
    assert names(first) == ["t4", "t3", "t2", "t1"]
    assert queue.depth == 2 and metrics.QUEUE_DEPTH._value.get() == 2
    assert drain(queue) == [["t5"], ["t6"]]
    assert queue.depth == 0


def test_an_input_over_the_budget_still_forms_a_batch_alone():
    queue = open_queue(max_batch_tokens=64)
    admit(queue, [500, 1])
    assert drain(queue) == [["t500"], ["t1"]]


def test_texts_and_rerank_pairs_share_a_batch_counted_by_their_tokens():
    queue = open_queue(max_batch_tokens=10)
    caller = FakeCaller()
    queue.admit(Priority.BULK, [RerankPair("q", "p4")], [4], [caller])
    admit(queue, [4, 4])
    batch = queue.next_batch()
    assert len(batch) == 2 and isinstance(batch[0].input, RerankPair) and batch[0].caller is caller
    assert drain(queue) == [["t4"]]


# -- interactive first, within the burst bound ----------------------------------------------------


def test_interactive_inputs_go_before_every_bulk_one_that_waited_longer():
    queue = open_queue(max_batch_tokens=100, bulk_batch_tokens=10)
    admit(queue, [5] * 20, name="p")
    admit(queue, [2], priority=Priority.INTERACTIVE, name="q")
    assert names(queue.next_batch()) == ["q2"]
    bulk = drain(queue)
    # Bulk batches are capped at bulk_batch_tokens: what a later query waits behind stays short.
    assert len(bulk) == 10 and all(batch == ["p5", "p5"] for batch in bulk)


def test_interactive_batches_are_not_capped_at_the_bulk_budget():
    queue = open_queue(max_batch_tokens=100, bulk_batch_tokens=10)
    admit(queue, [5] * 20, priority=Priority.INTERACTIVE, name="q")
    assert len(queue.next_batch()) == 20


def test_after_each_burst_of_interactive_batches_one_bulk_batch_runs():
    queue = open_queue(max_batch_tokens=5, bulk_batch_tokens=5, interactive_burst=2)
    admit(queue, [5, 5], name="p")
    admit(queue, [5] * 6, priority=Priority.INTERACTIVE, name="q")
    order = [batch[0][0] for batch in drain(queue)]
    # Two query batches, a passage, two more, the other passage; with no passage left, no pause.
    assert order == ["q", "q", "p", "q", "q", "p", "q", "q"]


def test_a_full_bulk_backlog_never_refuses_a_query():
    queue = open_queue(max_queue=4)
    admit(queue, [1, 1, 1, 1])
    with pytest.raises(QueueFull):
        admit(queue, [1])
    admit(queue, [1], priority=Priority.INTERACTIVE, name="q")
    assert queue.depth == 5
    assert names(queue.next_batch()) == ["q1"]


# -- bulk inputs packed by length -----------------------------------------------------------------


def test_bulk_inputs_are_packed_around_the_oldest_by_length():
    queue = open_queue(max_batch_tokens=600)
    # A long chunk and its document's short tail arrive together, twice, then a long one.
    admit(queue, [300, 40, 290, 50, 280])
    # In arrival order: [300, 40], [290, 50], [280]. Packed: the oldest with the closest that
    # fits, the short ones together, then the last long one.
    assert drain(queue) == [["t300", "t290"], ["t50", "t40"], ["t280"]]


def test_packing_keeps_padding_within_its_share_of_the_tokens_or_the_slack():
    queue = open_queue(max_batch_tokens=1000)
    admit(queue, [100, 60])  # together: 200 padded for 160 tokens, 40 wasted (> 15% and > 16)
    assert drain(queue) == [["t100"], ["t60"]]
    admit(queue, [20, 8])  # together: 40 padded for 28 tokens, 12 wasted (within the 16-token slack)
    assert drain(queue) == [["t20", "t8"]]


def test_packing_looks_only_at_the_window_behind_the_oldest_and_keeps_the_order_of_the_rest():
    queue = open_queue(max_batch_tokens=10_000)
    admit(queue, [100])
    admit(queue, [10] * PACK_WINDOW, name="s")  # each pads a 100-token input too much
    admit(queue, [100], name="late")  # its twin, but beyond the window
    assert names(queue.next_batch()) == ["t100"]
    second = names(queue.next_batch())
    assert second == ["s10"] * PACK_WINDOW  # the short ones together, the late long one not among them
    assert names(queue.next_batch()) == ["late100"]


# -- callers that went away -----------------------------------------------------------------------


def test_a_caller_that_went_away_stops_counting_at_once_and_costs_no_forward_pass():
    queue = open_queue()
    admit(queue, [1], priority=Priority.INTERACTIVE, name="a")
    gone = admit(queue, [1], priority=Priority.INTERACTIVE, name="gone")[0]
    admit(queue, [1], priority=Priority.INTERACTIVE, name="b")
    before = skipped()
    gone.caller.leave()
    queue.withdraw(gone)
    assert queue.depth == 2 and metrics.QUEUE_DEPTH._value.get() == 2  # the autoscaler's signal drops now
    assert names(queue.next_batch()) == ["a1", "b1"]
    assert skipped() == before + 1
    assert queue.depth == 0 and queue.empty


def test_a_caller_gone_at_the_head_is_skipped_even_before_it_was_withdrawn():
    queue = open_queue()
    gone = admit(queue, [1], name="gone")[0]
    admit(queue, [1], name="kept")
    gone.caller.leave()
    assert names(queue.next_batch()) == ["kept1"]
    assert queue.depth == 0


def test_packing_passes_over_callers_that_went_away_and_keeps_the_order_of_those_left():
    queue = open_queue(max_batch_tokens=100)
    admit(queue, [90], name="a")
    gone = admit(queue, [10], name="gone")[0]
    admit(queue, [80], name="b")
    admit(queue, [85], name="c")
    gone.caller.leave()
    queue.withdraw(gone)
    # Nothing fits beside 90 within 100 tokens but the one that left; b still before c.
    assert drain(queue) == [["a90"], ["b80"], ["c85"]]
    assert queue.depth == 0


def test_packing_never_picks_a_caller_that_went_away_even_where_it_would_fit_best():
    queue = open_queue(max_batch_tokens=20)
    admit(queue, [10], name="a")
    admit(queue, [15], name="c")  # live, so the window starts behind it
    gone = admit(queue, [10], name="gone")[0]
    admit(queue, [10], name="b")
    gone.caller.leave()  # not withdrawn yet: its cancellation has not been reported
    assert names(queue.next_batch()) == ["a10", "b10"]
    assert drain(queue) == [["c15"]]
    assert queue.depth == 0


def test_when_every_waiting_caller_went_away_the_batch_is_empty():
    queue = open_queue()
    for entry in admit(queue, [1, 1]):
        entry.caller.leave()
    assert queue.next_batch() == [] and queue.empty


# -- admission --------------------------------------------------------------------------------------


def test_past_max_queue_a_whole_call_is_refused_at_once_and_counted():
    queue = open_queue(max_queue=4)
    admit(queue, [1, 1, 1])
    before = rejected()
    with pytest.raises(QueueFull) as caught:
        admit(queue, [1, 1])
    assert caught.value.code == "RESOURCE_EXHAUSTED"
    assert caught.value.metadata == {"waiting": "3", "limit": "4"}
    assert rejected() == before + 2 and queue.depth == 3  # none of the call's inputs was queued
    admit(queue, [1])  # exactly at the limit still fits
    queue.next_batch()
    admit(queue, [1, 1])  # once the queue drained, the same call fits again
    assert queue.depth == 2


def test_a_queue_not_open_refuses_and_a_closed_one_hands_back_what_waited():
    queue: BatchQueue[FakeCaller] = BatchQueue(max_batch_tokens=100, max_queue=10)
    with pytest.raises(EmbedderStopping):
        admit(queue, [1])
    queue.open()
    admit(queue, [1], name="p")
    admit(queue, [1], priority=Priority.INTERACTIVE, name="q")
    left = queue.close()
    assert names(left) == ["q1", "p1"] and queue.depth == 0 and queue.empty
    with pytest.raises(EmbedderStopping):
        admit(queue, [1])


def test_bulk_batches_take_tenants_in_turn_so_a_big_document_delays_a_small_one_by_one_batch():
    queue = open_queue(max_batch_tokens=100, bulk_batch_tokens=40)
    big = [queue.admit(Priority.BULK, [TextInput(f"a{n}")], [10], [FakeCaller()], owner="acme")[0] for n in range(40)]
    small = queue.admit(Priority.BULK, [TextInput("b0"), TextInput("b1")], [10, 10], [FakeCaller()] * 2, owner="globex")
    later = queue.admit(Priority.BULK, [TextInput("c0")], [10], [FakeCaller()], owner="initech")
    batches = drain(queue)
    # acme's first batch was due; then globex's whole upload, then initech's, then acme again.
    assert batches[0] == ["a0", "a1", "a2", "a3"] and sorted(batches[1]) == ["b0", "b1"] and batches[2] == ["c0"]
    assert sum(len(batch) for batch in batches) == len(big) + len(small) + len(later) and queue.depth == 0
    # one tenant alone: its inputs in order, as before
    assert [name for batch in batches[3:] for name in batch] == [f"a{n}" for n in range(4, 40)]


def test_a_tenant_whose_callers_all_went_away_loses_its_turn_to_the_next():
    queue = open_queue(bulk_batch_tokens=40)
    gone = queue.admit(Priority.BULK, [TextInput("a0")], [10], [FakeCaller()], owner="acme")
    gone[0].caller.leave()
    queue.withdraw(gone[0])
    queue.admit(Priority.BULK, [TextInput("b0")], [10], [FakeCaller()], owner="globex")
    assert names(queue.next_batch()) == ["b0"] and queue.empty
