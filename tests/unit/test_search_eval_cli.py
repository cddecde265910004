"""`knowledge eval`: BEIR loading, the metrics, the verdict, and a clear error on HTTP 501."""

from __future__ import annotations

import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from knowledge_cli.evaluate import Dataset, EvalError, ndcg, recall, report, score, unique
from knowledge_cli.main import main

DATASET = Path(__file__).resolve().parents[1] / "data" / "search_eval"


def test_our_dataset_loads_in_the_beir_layout():
    dataset = Dataset.load(DATASET)
    assert len(dataset.corpus) >= 60 and len(dataset.queries) >= 36
    assert all(dataset.qrels[q] and set(dataset.qrels[q]) <= set(dataset.corpus) for q in dataset.queries)


def test_a_folder_without_the_layout_is_a_clear_error(tmp_path):
    with pytest.raises(EvalError, match="not a BEIR dataset"):
        Dataset.load(tmp_path)


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
    def do_POST(self):  # noqa: N802 - the http.server API
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
            main(["eval", str(DATASET), "--base-url", f"http://127.0.0.1:{server.server_address[1]}/api/v1/knowledge",
                  "--token", "t"])
    finally:
        server.shutdown()
        server.server_close()
    assert exited.value.code == 1
    assert "does not implement creating a corpus yet (HTTP 501 on POST /corpora)" in capsys.readouterr().err
