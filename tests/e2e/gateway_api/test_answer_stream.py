"""Streamed answers and conversations through Envoy, on the stack's extractive synthesiser:
``POST /query:stream`` sends its head, the answer's sentences as they are written, then the whole
answer with its citations; a follow-up question finds its source only with the conversation."""

from __future__ import annotations

import json

import httpx

from tests.support.gateway_api import SEARCHABLE, auth
from tests.support.stack import wait_for_job

POLICIES = {
    "leave.md": "# Annual leave\n\nFull-time employees receive 25 days of annual leave per year. "
    "Part-time staff receive annual leave pro rata: 15 days of annual leave per year.",
    "parking.md": "# Parking\n\nPart-time staff may use the staff car park on the days they work. "
    "How many spaces part-time staff get depends on the site.",
    "hours.md": "# Working hours\n\nPart-time staff work at most 30 hours a week. How many hours "
    "part-time staff work is agreed with their manager.",
}


def corpus_of_policies(stack, token, tenant: str) -> tuple[dict, str]:
    headers = auth(token(tenant))
    corpus = httpx.post(f"{stack['base']}/corpora", json={"name": "Policies"}, headers=headers).json()
    for name, text in POLICIES.items():
        reply = httpx.post(
            f"{stack['base']}/texts",
            json={"corpus_id": corpus["corpus_id"], "text": text, "title": name},
            headers=headers,
        )
        assert reply.status_code == 200, reply.text
        job, _ = wait_for_job(stack["base"], headers, reply.json()["job_id"])
        assert job["state"] == SEARCHABLE, job
    return headers, corpus["corpus_id"]


def stream(stack, headers: dict, body: dict) -> list[dict]:
    """The answer's messages, one JSON object per line, as they arrive."""
    with httpx.stream("POST", f"{stack['base']}/query:stream", json=body, headers=headers, timeout=60) as reply:
        assert reply.status_code == 200, reply.read()
        return [json.loads(line) for line in reply.iter_lines() if line.strip()]


def test_a_streamed_answer_sends_its_head_then_its_text_then_its_citations(stack, token):
    headers, corpus_id = corpus_of_policies(stack, token, "stream-rest")
    messages = stream(
        stack, headers, {"query": "How many days of annual leave do employees get?", "corpus_id": corpus_id}
    )
    head, *deltas, done = messages
    assert head["started"]["source_count"] >= 1 and head["started"]["relevance"] != "RELEVANCE_LOW"
    assert deltas and all(set(m) == {"delta"} for m in deltas)  # the text, before anything else
    answer = done["done"]
    assert "25 days" in "".join(m["delta"] for m in deltas) and answer["citations"]
    assert " ".join("".join(m["delta"] for m in deltas).split()) == answer["answer"]
    assert answer["citations"][0]["filename"] == "leave.md"
    # the same answer as Query's
    whole = httpx.post(
        f"{stack['base']}/query",
        json={"query": "How many days of annual leave do employees get?", "corpus_id": corpus_id},
        headers=headers,
    ).json()
    assert whole["answer"] == answer["answer"]
    # bad input is the API's own refusal, not a stream
    refused = httpx.post(
        f"{stack['base']}/query:stream",
        json={"query": "x", "history": [{"role": "TURN_ROLE_UNSPECIFIED", "text": "hi"}]},
        headers=headers,
    )
    assert refused.status_code == 400 and refused.json()["details"][0]["metadata"]["field"] == "history[0].role"


def test_a_follow_up_finds_its_source_only_with_the_conversation(stack, token):
    headers, corpus_id = corpus_of_policies(stack, token, "stream-talk")
    first = "How many days of annual leave do employees get?"
    follow_up = "and how many for part-time staff?"
    alone = httpx.post(f"{stack['base']}/query", json={"query": follow_up, "corpus_id": corpus_id}, headers=headers)
    history = [{"role": "TURN_ROLE_USER", "text": first}, {"role": "TURN_ROLE_ASSISTANT", "text": "25 days [1]."}]
    talk = httpx.post(
        f"{stack['base']}/query", json={"query": follow_up, "corpus_id": corpus_id, "history": history}, headers=headers
    )
    assert alone.status_code == talk.status_code == 200, (alone.text, talk.text)
    assert [c["filename"] for c in alone.json()["citations"]][:1] != ["leave.md"]
    answer = talk.json()
    assert answer["citations"][0]["filename"] == "leave.md" and "15 days" in answer["answer"]
    assert answer["condensed_query"] == f"{first} {follow_up}" and "no language model" in answer["conversation_note"]
    assert alone.json()["condensed_query"] == "" and alone.json()["conversation_note"] == ""
