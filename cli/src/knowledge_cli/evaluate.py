"""``knowledge eval DIR``: retrieval quality of a running stack on a BEIR-layout dataset.

The dataset is ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``,
``text``) and ``qrels/test.tsv`` (``query-id``, ``corpus-id``, ``score``). The corpus is
ingested through the public REST API into a new corpus (title as the heading, text as the
body), every query runs in VECTOR, LEXICAL and HYBRID modes, and nDCG@10 and Recall@100 are
printed per mode, with HYBRID's margin over the better single channel.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from knowledge_cli.client import DEFAULT_URL

MODES = ("VECTOR", "LEXICAL", "HYBRID")
NDCG_AT = 10
RECALL_AT = 100
MAX_GAP_POINTS = 1.0  # HYBRID may trail the better single channel by at most this much nDCG@10


class EvalError(RuntimeError):
    """The dataset or the stack cannot be evaluated; the message says why."""


@dataclass(frozen=True)
class Dataset:
    corpus: dict[str, tuple[str, str]]  # id -> (title, text)
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]  # query id -> {corpus id: relevance}

    @classmethod
    def load(cls, directory: Path) -> Dataset:
        try:
            corpus = {}
            for row in _jsonl(directory / "corpus.jsonl"):
                corpus[str(row["_id"])] = (str(row.get("title") or ""), str(row.get("text") or ""))
            queries = {str(row["_id"]): str(row["text"]) for row in _jsonl(directory / "queries.jsonl")}
            qrels: dict[str, dict[str, int]] = {}
            lines = (directory / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()
        except (OSError, KeyError, ValueError) as error:
            raise EvalError(f"{directory} is not a BEIR dataset ({error})") from None
        for line in lines[1:]:
            parts = line.split("\t")
            if len(parts) >= 3 and int(parts[2]) > 0:
                qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
        queries = {q: text for q, text in queries.items() if q in qrels}
        if not corpus or not queries:
            raise EvalError(f"{directory}: no documents or no judged queries")
        return cls(corpus=corpus, queries=queries, qrels=qrels)


def _jsonl(path: Path) -> Iterable[dict]:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def document_text(title: str, text: str) -> str:
    """A BEIR document as extracted text: the title is its heading."""
    return f"# {title}\n\n{text}" if title else text


def ndcg(ranked: Sequence[str], relevant: Mapping[str, int], k: int = NDCG_AT) -> float:
    gains = [relevant.get(doc, 0) for doc in ranked[:k]]
    dcg = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(gains))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall(ranked: Sequence[str], relevant: Mapping[str, int], k: int = RECALL_AT) -> float:
    return len(set(ranked[:k]) & set(relevant)) / len(relevant) if relevant else 0.0


def unique(ids: Iterable[str]) -> list[str]:
    """Chunk hits as a document ranking: each document at its best chunk's place."""
    seen: dict[str, None] = {}
    for value in ids:
        seen.setdefault(value, None)
    return list(seen)


def score(dataset: Dataset, rankings: Mapping[str, Mapping[str, Sequence[str]]]) -> dict[str, dict[str, float]]:
    """Mean nDCG@10 and Recall@100 per mode from ``rankings[mode][query id]`` (corpus ids, best first)."""
    results = {}
    for mode, by_query in rankings.items():
        ndcgs = [ndcg(by_query.get(q, []), dataset.qrels[q]) for q in dataset.queries]
        recalls = [recall(by_query.get(q, []), dataset.qrels[q]) for q in dataset.queries]
        results[mode] = {"ndcg@10": sum(ndcgs) / len(ndcgs), "recall@100": sum(recalls) / len(recalls)}
    return results


def report(results: Mapping[str, Mapping[str, float]]) -> tuple[str, bool]:
    """The printed table and whether HYBRID is within one point of the better single channel."""
    lines = [f"{'mode':<8} {'nDCG@10':>8} {'Recall@100':>11}"]
    for mode in MODES:
        if mode in results:
            lines.append(f"{mode:<8} {results[mode]['ndcg@10']:>8.4f} {results[mode]['recall@100']:>11.4f}")
    ok = True
    if all(m in results for m in MODES):
        best = max(results["VECTOR"]["ndcg@10"], results["LEXICAL"]["ndcg@10"])
        gap = (results["HYBRID"]["ndcg@10"] - best) * 100
        ok = gap >= -MAX_GAP_POINTS
        lines.append(f"HYBRID vs better single channel: {gap:+.2f} nDCG@10 points ({'ok' if ok else 'BELOW'})")
    return "\n".join(lines), ok


class RestStack:
    """The public REST API of a running stack (``knowledge up``)."""

    def __init__(self, base_url: str, token: str, *, timeout_s: float = 60.0) -> None:
        import httpx

        self._http = httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout_s,
                                  headers={"Authorization": f"Bearer {token}"})

    def _call(self, method: str, path: str, what: str, **kwargs) -> dict:
        import httpx

        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as error:
            raise EvalError(
                f"cannot reach the stack for {what} ({type(error).__name__}); is `knowledge up` running?"
            ) from None
        if response.status_code == 501:
            raise EvalError(f"the stack does not implement {what} yet (HTTP 501 on {method} {path})")
        if response.status_code >= 400:
            raise EvalError(f"{what} failed: HTTP {response.status_code} {response.text[:300]}")
        return response.json()

    def create_corpus(self, name: str) -> str:
        return str(self._call("POST", "/corpora", "creating a corpus", json={"name": name})["corpus_id"])

    def upload(self, corpus_id: str, filename: str, text: str) -> str:
        reply = self._call("POST", "/upload", "uploading a document", params={"corpus_id": corpus_id,
                           "filename": filename}, content=text.encode(), headers={"Content-Type": "text/markdown"})
        return str(reply["job_id"])

    def wait(self, job_id: str, timeout_s: float = 600.0) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            job = self._call("GET", f"/ingest/{job_id}", "reading an ingest job")
            state = job.get("state", "")
            if state.endswith("SEARCHABLE"):
                return str((job.get("result") or {}).get("document_id", ""))
            if state.endswith(("FAILED", "CANCELLED")):
                raise EvalError(f"ingest job {job_id} ended {state}: {job.get('error', '')}")
            time.sleep(0.2)
        raise EvalError(f"ingest job {job_id} did not finish in {timeout_s:.0f} s")

    def search(self, corpus_id: str, query: str, mode: str, top_k: int) -> list[str]:
        body = {"query": query, "corpus_id": corpus_id, "top_k": top_k, "mode": f"SEARCH_MODE_{mode}"}
        return [r["document_id"] for r in self._call("POST", "/search", "search", json=body).get("results", [])]


def run_rest(dataset: Dataset, stack: RestStack, progress: Callable[[str], None]) -> dict[str, dict[str, float]]:
    corpus_id = stack.create_corpus(f"eval-{uuid.uuid4().hex[:8]}")
    jobs = {}
    for doc_id, (title, text) in dataset.corpus.items():
        jobs[stack.upload(corpus_id, f"{doc_id}.md", document_text(title, text))] = doc_id
    progress(f"uploaded {len(jobs)} documents into corpus {corpus_id}; waiting for ingestion")
    by_document = {stack.wait(job): doc_id for job, doc_id in jobs.items()}
    rankings: dict[str, dict[str, list[str]]] = {mode: {} for mode in MODES}
    for mode in MODES:
        for query_id, text in dataset.queries.items():
            hits = stack.search(corpus_id, text, mode, RECALL_AT)
            rankings[mode][query_id] = unique(by_document[h] for h in hits if h in by_document)
    return score(dataset, rankings)


def main(options: argparse.Namespace) -> int:
    dataset = Dataset.load(Path(options.directory))
    token = options.token or _dev_token(options.tenant or f"eval-{uuid.uuid4().hex[:8]}")
    print(f"knowledge eval: {len(dataset.corpus)} documents, {len(dataset.queries)} judged queries", file=sys.stderr)
    results = run_rest(dataset, RestStack(options.base_url, token), lambda m: print(m, file=sys.stderr))
    table, ok = report(results)
    print(table)
    return 0 if ok else 1


def _dev_token(tenant: str) -> str:
    from knowledge_cli.devtoken import mint_local_token

    try:
        return mint_local_token(tenant, capabilities=["corpus.create", "corpus.read", "document.upload", "search"])
    except FileNotFoundError as error:
        raise EvalError(f"{error}; or pass --token") from None


def add_parser(commands) -> None:
    parser = commands.add_parser("eval", help="nDCG@10 and Recall@100 per search mode on a BEIR-layout dataset")
    parser.add_argument("directory", help="folder with corpus.jsonl, queries.jsonl and qrels/test.tsv")
    parser.add_argument("--base-url", default=DEFAULT_URL, help="the REST API base URL")
    parser.add_argument("--token", help="bearer token; default: a development token for a fresh tenant")
    parser.add_argument("--tenant", help="tenant of the development token (default: a fresh eval-* tenant)")
    parser.set_defaults(run=_run)


def _run(options: argparse.Namespace) -> int:
    try:
        return main(options)
    except EvalError as error:
        print(f"knowledge eval: {error}", file=sys.stderr)
        return 1
