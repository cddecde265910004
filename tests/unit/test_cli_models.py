"""``knowledge models``: its routes, its lines, and ``swap --eval`` scoring the set with both
models' vectors (the candidate's through ``vectors: EMBEDDING_VECTORS_CANDIDATE``) before the
gate is asked, against a fake gateway."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from knowledge_cli import client as codes
from knowledge_cli.main import parser

DATASET = Path(__file__).resolve().parents[1] / "data" / "search_eval"
CHANGE = {
    "change_id": "3",
    "state": "MODEL_CHANGE_STATE_RE_EMBEDDING",
    "from_model": "minilm",
    "to_model": "e5",
    "chunks_done": "40",
    "chunks_total": "80",
    "chunks_per_second": 20.0,
    "eta_seconds": 2.0,
    "reading_model": "minilm",
}


def run_against(monkeypatch, handler):
    real = httpx.Client.__init__
    monkeypatch.setattr(
        httpx.Client, "__init__", lambda self, **kw: real(self, **{**kw, "transport": httpx.MockTransport(handler)})
    )
    monkeypatch.setenv("KNOWLEDGE_TOKEN", "t")

    def run(*argv: str) -> int:
        options = parser().parse_args(list(argv))
        return options.run(options)

    return run


def test_change_status_rollback_call_their_routes(monkeypatch, capsys):
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.url.path.removeprefix("/api/v1/knowledge"), request.content))
        if request.method == "GET":
            return httpx.Response(200, json=CHANGE)
        return httpx.Response(200, json={"change": CHANGE})

    run = run_against(monkeypatch, handler)
    assert run("models", "change", "--to", "e5") == codes.OK
    assert seen[-1][:2] == ("POST", "/modelChanges") and json.loads(seen[-1][2]) == {"to_model": "e5"}
    assert capsys.readouterr().out == "3\tre_embedding\tminilm -> e5\t40/80 chunks\t20.0/s\t2 s left\treading minilm\n"
    assert run("models", "status") == codes.OK and seen[-1][:2] == ("GET", "/modelChanges/current")
    assert run("models", "rollback") == codes.OK and seen[-1][:2] == ("POST", "/modelChanges/current:rollback")
    assert run("models", "cancel") == codes.OK and seen[-1][:2] == ("POST", "/modelChanges/current:cancel")


def test_swap_with_an_evaluation_set_sends_both_models_figures(monkeypatch, capsys):
    """The current vectors rank every query's judged document first, the candidate's last: the
    candidate's figures are worse, and the held change exits non-zero."""
    qrels = {}
    for line in (DATASET / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        query, doc, _ = line.split("\t")
        qrels.setdefault(query, doc)
    queries = {json.loads(line)["text"]: json.loads(line)["_id"] for line in (DATASET / "queries.jsonl").open()}
    titles: list[str] = []
    swaps = []

    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/api/v1/knowledge")
        body = json.loads(request.content) if request.content else {}
        if path == "/corpora":
            return httpx.Response(200, json={"corpus_id": "9"})
        if path == "/texts:batch":
            start = len(titles)
            titles.extend(item["title"].removesuffix(".md") for item in body["items"])
            return httpx.Response(
                200,
                json={"items": [{"index": i, "job": {"job_id": f"j{start + i}"}} for i in range(len(body["items"]))]},
            )
        if path.startswith("/ingest/"):
            index = int(path.rsplit("/j", 1)[1])
            return httpx.Response(
                200, json={"state": "DOCUMENT_STATE_SEARCHABLE", "result": {"document_id": titles[index]}}
            )
        if path == "/search":
            judged = qrels.get(queries[body["query"]], "")
            others = [t for t in titles if t != judged]
            ranked = others + [judged] if body.get("vectors") == "EMBEDDING_VECTORS_CANDIDATE" else [judged, *others]
            return httpx.Response(200, json={"results": [{"document_id": d} for d in ranked if d]})
        swaps.append(body)
        return httpx.Response(
            200, json={"change": {**CHANGE, "state": "MODEL_CHANGE_STATE_HELD", "gate_reason": "drop"}}
        )

    run = run_against(monkeypatch, handler)
    assert run("models", "swap", "--eval", str(DATASET)) == codes.FAILED
    (sent,) = swaps
    current, candidate = sent["current"]["modes"], sent["candidate"]["modes"]
    assert set(current) == set(candidate) == {"VECTOR", "LEXICAL", "HYBRID"}
    assert current["HYBRID"]["ndcg_at_10"] > candidate["HYBRID"]["ndcg_at_10"]
    assert sent["force"] is False
    assert "gate\tdrop" in capsys.readouterr().out
