"""The model change's own evaluation: what a stored set may hold, both models' figures from
search's rankings, a change's events, and the token ingest searches with on the operator's behalf."""

from __future__ import annotations

import jwt
import pytest
from knowledge_ingest.domain.errors import InvalidRequest
from knowledge_ingest.domain.evaluation import EvaluationSet, JudgedQuery, checked_set, figures
from knowledge_ingest.domain.events import EventType
from knowledge_ingest.domain.model_change import ChangeState, Figures, ModeFigures, ModelChange, change_event, gate
from knowledge_ingest.events.api import event_message
from knowledge_runtime.reach import Band
from knowledge_runtime.retrieval_metrics import ndcg


def query(query_id: str = "q1", text: str = "what is it", relevant: dict | None = None) -> JudgedQuery:
    return JudgedQuery(query_id, text, {"11": 1} if relevant is None else relevant)


def a_set(*queries: JudgedQuery, name: str = "s") -> EvaluationSet:
    return EvaluationSet("t", name, 7, "/", Band.TENANT, tuple(queries))


def test_a_good_set_is_kept_as_given():
    name, corpus, queries = checked_set("scifact.dev", "7", [query(), query("q2")])
    assert (name, corpus, [q.query_id for q in queries]) == ("scifact.dev", 7, ["q1", "q2"])


@pytest.mark.parametrize(
    ("name", "corpus", "queries", "field"),
    [
        ("Bad Name", "7", [query()], "name"),
        ("s", "seven", [query()], "corpus_id"),
        ("s", "7", [], "queries"),
        ("s", "7", [query(), query()], "queries[1].query_id"),
        ("s", "7", [query(text=" ")], "queries[0].text"),
        ("s", "7", [query(text="x" * 3501)], "queries[0].text"),
        ("s", "7", [query(relevant={})], "queries[0].relevant"),
        ("s", "7", [query(relevant={"doc-a": 1})], "queries[0].relevant"),
        ("s", "7", [query(relevant={"11": 0})], "queries[0].relevant"),
    ],
)
def test_a_bad_set_is_refused_by_its_field(name, corpus, queries, field):
    with pytest.raises(InvalidRequest) as refused:
        checked_set(name, corpus, queries)
    assert refused.value.metadata["field"] == field


def test_figures_are_the_mean_over_every_query_of_every_set_per_mode():
    one = a_set(query("q1", relevant={"1": 1}), query("q2", relevant={"2": 1}), name="one")
    two = a_set(query("q1", relevant={"3": 1}), name="two")
    rankings = {
        ("t", "one", "q1", "HYBRID"): ["1"],  # 1.0
        ("t", "one", "q2", "HYBRID"): ["9", "2"],  # 1/log2(3)
        ("t", "two", "q1", "HYBRID"): ["9"],  # 0: the same query id in another set is its own
        ("t", "one", "q1", "VECTOR"): ["1"],
    }
    measured = figures([one, two], rankings)
    assert measured.modes["HYBRID"].ndcg_at_10 == pytest.approx((1.0 + ndcg(["9", "2"], {"2": 1})) / 3)
    assert measured.modes["HYBRID"].recall_at_100 == pytest.approx(2 / 3)
    assert measured.modes["VECTOR"].ndcg_at_10 == pytest.approx(1 / 3)
    assert measured.modes["LEXICAL"].ndcg_at_10 == 0.0  # no answer counts as an empty one
    with pytest.raises(ValueError):
        figures([], {})


def test_the_gate_reads_what_the_sets_measured():
    judged = a_set(query("q1", relevant={"1": 1}))
    current = figures([judged], {("t", "s", "q1", m): ["1"] for m in ("VECTOR", "LEXICAL", "HYBRID")})
    candidate = figures([judged], {("t", "s", "q1", m): ["2", "1"] for m in ("VECTOR", "LEXICAL", "HYBRID")})
    assert not gate(current, candidate).swap
    assert gate(candidate, current).swap


def change(state: ChangeState, **more) -> ModelChange:
    values = {
        "change_id": 4,
        "from_model": "minilm",
        "from_store": "chunks",
        "to_model": "e5",
        "to_store": "next",
        "to_dimension": 384,
        "state": state,
        "chunks_done": 10,
        "forced": False,
        "gate_why": "",
        "current_figures": None,
        "candidate_figures": None,
        "create_time": 0.0,
        "swap_time": None,
        "end_time": None,
        "tenant": "ops",
    }
    return ModelChange(**(values | more))


@pytest.mark.parametrize(
    ("state", "kind"),
    [
        (ChangeState.RE_EMBEDDING, EventType.MODEL_CHANGE_STARTED),
        (ChangeState.EVALUATING, EventType.MODEL_CHANGE_RE_EMBEDDED),
        (ChangeState.SWAPPED, EventType.MODEL_CHANGE_GATED),
        (ChangeState.HELD, EventType.MODEL_CHANGE_GATED),
        (ChangeState.ROLLED_BACK, EventType.MODEL_CHANGE_ROLLED_BACK),
        (ChangeState.CANCELLED, EventType.MODEL_CHANGE_CANCELLED),
        (ChangeState.FINISHED, EventType.MODEL_CHANGE_FINISHED),
    ],
)
def test_each_state_a_change_reaches_is_an_event(state, kind):
    event = change_event(change(state))
    assert event.type is kind and event.corpus_id is None and event.document_id is None
    assert event.detail["change_id"] == "4" and event.detail["state"] == state.value
    assert ("figures" in event.detail) == (kind is EventType.MODEL_CHANGE_GATED)


def test_a_gated_event_carries_both_figures_to_the_watcher():
    import datetime
    import uuid

    from knowledge.v1 import ingest_pb2
    from knowledge_ingest.domain.events import Event

    mine = Figures(modes={"HYBRID": ModeFigures(0.7, 0.9)})
    theirs = Figures(modes={"HYBRID": ModeFigures(0.6, 0.8)})
    held = change(ChangeState.HELD, gate_why="would drop", current_figures=mine, candidate_figures=theirs)
    new = change_event(held)
    sent = event_message(Event(3, uuid.uuid4(), new.type, None, None, datetime.datetime.now(datetime.UTC), new.detail))
    assert sent.type == "model.change_gated" and sent.reason == "would drop"
    assert sent.model_change.state == ingest_pb2.MODEL_CHANGE_STATE_HELD
    assert sent.model_change.current_figures.modes["HYBRID"].ndcg_at_10 == pytest.approx(0.7)
    assert sent.model_change.candidate_figures.modes["HYBRID"].recall_at_100 == pytest.approx(0.8)


def test_ingest_searches_with_the_operators_reach_never_another_tenant(keys_dir):
    from knowledge_runtime.service_tokens import ServiceTokenSigner
    from knowledge_runtime.settings import Env, ServiceKey

    key = ServiceKey.from_env(Env({"KNOWLEDGE_SERVICE_KEY_PATH": str(keys_dir / "dev-signing-key.pem")}))
    signer = ServiceTokenSigner(key, issuer="i", audience="a", subject="service:ingest")
    token = signer.token("ops", ["search"], {"scope": "/workspace:eng", "clearance": "CONFIDENTIAL"})
    claims = jwt.decode(token, options={"verify_signature": False})
    assert (claims["tenant"], claims["scope"], claims["clearance"]) == ("ops", "/workspace:eng", "CONFIDENTIAL")
    assert signer.token("ops", ["search"]) != token  # cached apart
    with pytest.raises(ValueError):
        signer.token("ops", ["search"], {"tenant": "other"})


def test_the_cli_judges_a_beir_set_by_the_uploaded_documents_ids():
    from knowledge_cli.evaluate import Dataset
    from knowledge_cli.models import set_queries

    dataset = Dataset(
        corpus={"d1": ("", "a"), "d2": ("", "b")},
        queries={"q1": "which", "q2": "what"},
        qrels={"q1": {"d1": 2, "d2": 1}, "q2": {"d2": 1}},
    )
    queries = set_queries(dataset, {"101": "d1", "102": "d2"})
    assert queries == [
        {"query_id": "q1", "text": "which", "relevant": {"101": 2, "102": 1}},
        {"query_id": "q2", "text": "what", "relevant": {"102": 1}},
    ]
