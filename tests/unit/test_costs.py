"""The one cost type (knowledge_runtime.costs): adding costs, the ledger's row and the message
search and documents-ai answer with (knowledge_runtime.convert)."""

import pytest
from knowledge_runtime.convert import cost as cost_message
from knowledge_runtime.costs import RECORD_COST, Cost, CostItem, cost_record

EMBED = CostItem("m", "embed", 2, 30, amount=0.001)
CHAT = CostItem("llm", "chat", 3, 100, 20, 0.02)


def test_adding_keeps_every_item_in_order_and_the_first_currency():
    total = Cost((EMBED,), "EUR") + Cost((CHAT,))
    assert total == Cost((EMBED, CHAT), "EUR")
    assert total.amount == pytest.approx(0.021)
    assert Cost() + Cost() == Cost() and Cost().amount == 0


def test_the_ledger_row_keeps_input_and_output_tokens_as_one_count():
    assert cost_record("acme", CHAT) == ("acme", "llm", "chat", 3, 120, 0.02)
    assert RECORD_COST.count("$") == len(cost_record("acme", CHAT))


def test_the_message_carries_the_totals_and_each_item():
    message = cost_message(Cost((EMBED, CHAT)))
    assert (message.currency, message.input_tokens, message.output_tokens) == ("USD", 130, 20)
    assert message.amount == pytest.approx(0.021)
    assert [(i.model_id, i.operation, i.texts, i.input_tokens, i.output_tokens) for i in message.items] == [
        ("m", "embed", 2, 30, 0),
        ("llm", "chat", 3, 100, 20),
    ]
    assert message.items[1].amount == pytest.approx(0.02)


def test_a_message_read_back_is_the_cost_it_was_made_from():
    from knowledge.v1 import common_pb2
    from knowledge_runtime.convert import cost_from_message

    original = Cost((EMBED, CHAT), "EUR")
    assert cost_from_message(cost_message(original)) == original
    assert cost_from_message(common_pb2.Cost()).currency == "USD"  # an unset currency reads as USD
