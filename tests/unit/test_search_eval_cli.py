"""`knowledge eval`: BEIR loading, the metrics, the verdict, and a clear error on HTTP 501."""

from __future__ import annotations

import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from knowledge_cli.evaluate import Dataset, EvalError, _modes, mrr, ndcg, percentile, recall, report, score, unique
from knowledge_cli.main import main

DATASET = Path(__file__).resolve().parents[1] / "data" / "search_eval"


def test_our_dataset_loads_in_the_beir_layout():
    dataset = Dataset.load(DATASET)
    assert len(dataset.corpus) >= 60 and len(dataset.queries) >= 36
    assert all(dataset.qrels[q] and set(dataset.qrels[q]) <= set(dataset.corpus) for q in dataset.queries)


def test_a_folder_without_the_layout_is_a_clear_error(tmp_path):
    with pytest.raises(EvalError, match="not a BEIR dataset"):
        Dataset.load(tmp_path)


def test_split_and_limit(tmp_path):
    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": d, "title": "", "text": d}) + "\n" for d in ("a", "b", "c", "d", "e"))
    )
    (tmp_path / "queries.jsonl").write_text(
        json.dumps({"_id": "q1", "text": "?"}) + "\n" + json.dumps({"_id": "q2", "text": "!"}) + "\n"
    )
    (tmp_path / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tc\t1\nq2\te\t0\n")
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq2\ta\t1\n")
    train = Dataset.load(tmp_path, split="train")
    assert list(train.queries) == ["q1"] and train.qrels == {"q1": {"c": 1}}  # a 0 judgement is not relevant
    assert Dataset.load(tmp_path).qrels == {"q2": {"a": 1}}  # default split: test
    limited = Dataset.load(tmp_path, split="train", limit=2)
    assert list(limited.corpus) == ["a", "b", "c"]  # the judged document plus the first two others
    assert list(Dataset.load(tmp_path, split="train", limit=0).corpus) == ["c"]
    with pytest.raises(EvalError, match="split 'dev'"):
        Dataset.load(tmp_path, split="dev")
    for bad in ("../x", ""):
        with pytest.raises(EvalError, match="--split"):
            Dataset.load(tmp_path, split=bad)
    with pytest.raises(EvalError, match="--limit"):
        Dataset.load(tmp_path, limit=-1)


def test_modes_parse():
    assert _modes("hybrid, vector,HYBRID") == ("HYBRID", "VECTOR")
    for bad in ("", "semantic", "vector,rerank"):
        with pytest.raises(EvalError, match="--modes"):
            _modes(bad)


def test_mrr_and_percentiles():
    relevant = {"a": 1}
    assert mrr(["x", "a"], relevant) == 0.5 and mrr(["x"] * 10 + ["a"], relevant) == 0.0
    assert (
        percentile([5.0, 1.0, 3.0, 2.0, 4.0], 50) == 3.0 and percentile([float(i) for i in range(1, 101)], 95) == 95.0
    )
    assert percentile([], 95) == 0.0
    dataset = Dataset(corpus={"a": ("", ""), "b": ("", "")}, queries={"q": "?"}, qrels={"q": {"a": 1}})
    results = score(dataset, {"HYBRID": {"q": ["b", "a"]}}, {"HYBRID": [10.0, 30.0, 20.0]})
    assert results["HYBRID"]["mrr@10"] == 0.5 and (results["HYBRID"]["p50_ms"], results["HYBRID"]["p95_ms"]) == (
        20.0,
        30.0,
    )
    assert "20.0" in report(results)[0]


def test_ndcg_and_recall():
    relevant = {"a": 2, "b": 1}
    assert ndcg(["a", "b", "x"], relevant) == pytest.approx(1.0)
    swapped = (1 / 1 + 3 / math.log2(3)) / (3 / 1 + 1 / math.log2(3))
    assert ndcg(["b", "a"], relevant) == pytest.approx(swapped)
    assert ndcg(["x"] * 10 + ["a"], relevant) == 0.0  # beyond @10
    assert recall(["x", "a"], relevant) == 0.5 and recall([], relevant) == 0.0
    assert unique(["d1", "d2", "d1", "d3"]) == ["d1", "d2", "d3"]


def test_report_flags_a_hybrid_more_than_one_point_below_the_better_channel():
    dataset = Dataset(corpus={"a": ("", ""), "b": ("", "")}, queries={"q": "?"}, qrels={"q": {"a": 1}})
    good = score(dataset, {"VECTOR": {"q": ["a"]}, "LEXICAL": {"q": ["b", "a"]}, "HYBRID": {"q": ["a", "b"]}})
    table, ok = report(good)
    assert ok and "HYBRID" in table and "+0.00" in table
    bad = score(dataset, {"VECTOR": {"q": ["a"]}, "LEXICAL": {"q": ["a"]}, "HYBRID": {"q": ["b", "a"]}})
    assert report(bad)[1] is False


class Unimplemented(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.dumps({"code": 12, "message": "this method is not implemented yet"}).encode()
        self.send_response(501)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_eval_against_a_stack_that_answers_501_says_so(capsys):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Unimplemented)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with pytest.raises(SystemExit) as exited:
            main(
                [
                    "eval",
                    str(DATASET),
                    "--base-url",
                    f"http://127.0.0.1:{server.server_address[1]}/api/v1/knowledge",
                    "--token",
                    "t",
                ]
            )
    finally:
        server.shutdown()
        server.server_close()
    assert exited.value.code == 1
    assert "does not implement creating a corpus yet (HTTP 501 on POST /corpora)" in capsys.readouterr().err


class BulkTexts(BaseHTTPRequestHandler):
    """POST /texts:batch answering a job per item (an item with "refuse" in its text is refused),
    GET /ingest/ID answering SEARCHABLE; every call recorded on the server."""

    def _answer(self, payload: dict) -> None:
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.calls.append(("POST", self.path, request))
        if not self.path.endswith("/texts:batch"):
            self.send_error(404)
            return
        self._answer(
            {
                "items": [
                    {"index": i, "error_reason": "INVALID_REQUEST", "error": "no"}
                    if "refuse" in item["text"]
                    else {"index": i, "job": {"job_id": f"job-{item['title']}"}}
                    for i, item in enumerate(request["items"])
                ]
            }
        )

    def do_GET(self):
        self.server.calls.append(("GET", self.path, None))
        job = self.path.rsplit("/", 1)[-1]
        self._answer({"job_id": job, "state": "DOCUMENT_STATE_SEARCHABLE", "result": {"document_id": f"row-{job}"}})

    def log_message(self, *args):
        pass


def test_eval_ingests_every_document_through_one_bulk_texts_call():
    from knowledge_cli.evaluate import RestStack, ingest

    server = ThreadingHTTPServer(("127.0.0.1", 0), BulkTexts)
    server.calls = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        stack = RestStack(f"http://127.0.0.1:{server.server_address[1]}/api/v1/knowledge", "t")
        dataset = Dataset(corpus={"a": ("Title A", "Body a."), "b": ("", "Body b.")}, queries={}, qrels={})
        by_document = ingest(dataset, stack, "7", progress=False)
        posts = [call for call in server.calls if call[0] == "POST"]
        refused = Dataset(corpus={"c": ("", "please refuse")}, queries={}, qrels={})
        with pytest.raises(EvalError, match="'c.md' was refused: no"):
            ingest(refused, stack, "7", progress=False)
    finally:
        server.shutdown()
        server.server_close()
    assert by_document == {"row-job-a.md": "a", "row-job-b.md": "b"}
    assert [(method, path) for method, path, _ in posts] == [("POST", "/api/v1/knowledge/texts:batch")]
    assert posts[0][2]["items"] == [
        {"corpus_id": "7", "text": "# Title A\n\nBody a.", "title": "a.md"},
        {"corpus_id": "7", "text": "Body b.", "title": "b.md"},
    ]
