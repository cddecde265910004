"""``knowledge eval DIR``: retrieval quality of a running stack on a BEIR-layout dataset.

The dataset is ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``,
``text``) and ``qrels/SPLIT.tsv`` (``query-id``, ``corpus-id``, ``score``; ``--split``,
default ``test``). The corpus is ingested through the public REST API into a new corpus
(title as the heading, text as the body) as a user's client would, every judged query runs
in each of ``--modes`` (VECTOR, LEXICAL, HYBRID; ``--rerank`` adds HYBRID with
``rerank: true``), and nDCG@10, Recall@100, MRR@10 and the p50/p95 latency of the search
call are printed per mode, with HYBRID's margin over the better single channel.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from knowledge_runtime.retrieval_metrics import RECALL_AT, mrr, ndcg, recall, unique

from knowledge_cli.client import DEFAULT_URL

MODES = ("VECTOR", "LEXICAL", "HYBRID")
RERANKED = "HYBRID+RERANK"
MAX_GAP_POINTS = 1.0  # HYBRID may trail the better single channel by at most this much nDCG@10


class EvalError(RuntimeError):
    """The dataset or the stack cannot be evaluated; the message says why."""


@dataclass(frozen=True)
class Dataset:
    corpus: dict[str, tuple[str, str]]  # id -> (title, text)
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]  # query id -> {corpus id: relevance}

    @classmethod
    def load(cls, directory: Path, *, split: str = "test", limit: int | None = None) -> Dataset:
        """The corpus, the judged queries of ``qrels/SPLIT.tsv``; ``limit``: the judged documents plus that many others."""
        if not split or "/" in split or "\\" in split or split.startswith("."):
            raise EvalError(f"--split must be a file name under qrels/, got {split!r}")
        try:
            corpus = {}
            for row in _jsonl(directory / "corpus.jsonl"):
                corpus[str(row["_id"])] = (str(row.get("title") or ""), str(row.get("text") or ""))
            queries = {str(row["_id"]): str(row["text"]) for row in _jsonl(directory / "queries.jsonl")}
            qrels: dict[str, dict[str, int]] = {}
            lines = (directory / "qrels" / f"{split}.tsv").read_text(encoding="utf-8").splitlines()
        except (OSError, KeyError, ValueError) as error:
            raise EvalError(f"{directory} is not a BEIR dataset with split {split!r} ({error})") from None
        for line in lines[1:]:
            parts = line.split("\t")
            if len(parts) >= 3 and parts[2].strip().lstrip("-").isdigit() and int(parts[2]) > 0:
                qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
        queries = {q: text for q, text in queries.items() if q in qrels}
        if limit is not None:
            if limit < 0:
                raise EvalError(f"--limit must be >= 0, got {limit}")
            judged = {doc for q in queries for doc in qrels[q]}
            others = [doc for doc in corpus if doc not in judged][:limit]
            keep = judged | set(others)
            corpus = {doc: value for doc, value in corpus.items() if doc in keep}
        qrels = {
            q: {doc: rel for doc, rel in judged.items() if doc in corpus} for q, judged in qrels.items() if q in queries
        }
        queries = {q: text for q, text in queries.items() if qrels.get(q)}
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


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile (q in [0, 100]); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))]


def score(
    dataset: Dataset,
    rankings: Mapping[str, Mapping[str, Sequence[str]]],
    latencies: Mapping[str, Sequence[float]] | None = None,
) -> dict[str, dict[str, float]]:
    """Mean nDCG@10, Recall@100 and MRR@10 per mode from ``rankings[mode][query id]`` (corpus ids,
    best first), and p50/p95 of ``latencies[mode]`` (milliseconds) when given."""
    results = {}
    for mode, by_query in rankings.items():
        count = len(dataset.queries)
        results[mode] = {
            "ndcg@10": sum(ndcg(by_query.get(q, []), dataset.qrels[q]) for q in dataset.queries) / count,
            "recall@100": sum(recall(by_query.get(q, []), dataset.qrels[q]) for q in dataset.queries) / count,
            "mrr@10": sum(mrr(by_query.get(q, []), dataset.qrels[q]) for q in dataset.queries) / count,
        }
        if latencies and latencies.get(mode):
            results[mode]["p50_ms"] = percentile(latencies[mode], 50)
            results[mode]["p95_ms"] = percentile(latencies[mode], 95)
    return results


def report(results: Mapping[str, Mapping[str, float]]) -> tuple[str, bool]:
    """The printed table and whether HYBRID is within one point of the better single channel."""
    lines = [f"{'mode':<14} {'nDCG@10':>8} {'Recall@100':>11} {'MRR@10':>8} {'p50 ms':>8} {'p95 ms':>8}"]
    for mode in (*MODES, RERANKED, *(m for m in results if m not in (*MODES, RERANKED))):
        if mode in results:
            row = results[mode]
            p50 = f"{row['p50_ms']:>8.1f}" if "p50_ms" in row else f"{'-':>8}"
            p95 = f"{row['p95_ms']:>8.1f}" if "p95_ms" in row else f"{'-':>8}"
            lines.append(
                f"{mode:<14} {row['ndcg@10']:>8.4f} {row['recall@100']:>11.4f} {row.get('mrr@10', 0.0):>8.4f} "
                f"{p50} {p95}"
            )
    ok = True
    if all(m in results for m in MODES):
        best = max(results["VECTOR"]["ndcg@10"], results["LEXICAL"]["ndcg@10"])
        gap = (results["HYBRID"]["ndcg@10"] - best) * 100
        ok = gap >= -MAX_GAP_POINTS
        lines.append(f"HYBRID vs better single channel: {gap:+.2f} nDCG@10 points ({'ok' if ok else 'BELOW'})")
    return "\n".join(lines), ok


class Progress:
    """A progress bar on stderr (items/s and ETA); silent when stderr is not a terminal unless forced."""

    def __init__(self, total: int, what: str, unit: str, *, enabled: bool | None = None) -> None:
        from tqdm import tqdm

        self._bar = tqdm(
            total=total,
            desc=what,
            unit=unit,
            file=sys.stderr,
            dynamic_ncols=True,
            disable=None if enabled is None else not enabled,
            mininterval=0.5,
        )

    def update(self, n: int = 1) -> None:
        self._bar.update(n)

    def close(self) -> None:
        self._bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class RestStack:
    """The public REST API of a running stack (``knowledge up``)."""

    def __init__(self, base_url: str, token: str, *, timeout_s: float = 60.0) -> None:
        import httpx

        from knowledge_cli.client import Client

        self._http = httpx.Client(
            base_url=base_url.rstrip("/"), timeout=timeout_s, headers={"Authorization": f"Bearer {token}"}
        )
        self._client = Client(base_url, token, timeout_s=timeout_s)

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

    def ingest_texts(self, items: Sequence[Mapping[str, str]]) -> Iterator[str]:
        """Texts through the bulk endpoint (``POST /texts:batch``, as many calls as it takes):
        each item's job id, in order; EvalError when the stack refuses one."""
        from knowledge_cli.client import ApiError

        try:
            for answer in self._client.ingest_texts(items):
                if "job" not in answer:
                    raise EvalError(
                        f"document {items[answer['index']].get('title', '')!r} was refused: "
                        f"{answer.get('error', '')} ({answer.get('error_reason', '')})"
                    )
                yield str(answer["job"]["job_id"])
        except ApiError as error:
            if error.status == 501:
                raise EvalError(
                    "the stack does not implement uploading texts yet (HTTP 501 on POST /texts:batch)"
                ) from None
            raise EvalError(f"uploading documents failed: {error}") from None

    def job_state(self, job_id: str) -> tuple[str, str]:
        """(state, document id) of an ingest job; EvalError when it failed."""
        job = self._call("GET", f"/ingest/{job_id}", "reading an ingest job")
        state = job.get("state", "")
        if state.endswith(("FAILED", "CANCELLED")):
            raise EvalError(f"ingest job {job_id} ended {state}: {job.get('error', '')}")
        return state, str((job.get("result") or {}).get("document_id", ""))

    def search(
        self, corpus_id: str, query: str, mode: str, top_k: int, *, rerank: bool = False, candidate: bool = False
    ) -> list[str]:
        """``candidate``: read the open model change's other vectors (``knowledge models swap``)."""
        body: dict = {"query": query, "corpus_id": corpus_id, "top_k": top_k, "mode": f"SEARCH_MODE_{mode}"}
        if rerank:
            body["rerank"] = True
        if candidate:
            body["vectors"] = "EMBEDDING_VECTORS_CANDIDATE"
        return [r["document_id"] for r in self._call("POST", "/search", "search", json=body).get("results", [])]


def ingest(
    dataset: Dataset,
    stack: RestStack,
    corpus_id: str,
    *,
    progress: bool | None = None,
    poll_s: float = 0.2,
    timeout_s: float = 3600.0,
) -> dict[str, str]:
    """Every dataset document into the corpus through the public API; {document id: corpus id}.

    The documents go as texts through the bulk endpoint, up to 1,000 per call.
    """
    ids = list(dataset.corpus)
    items = [
        {"corpus_id": corpus_id, "text": document_text(*dataset.corpus[doc_id]), "title": f"{doc_id}.md"}
        for doc_id in ids
    ]
    jobs: dict[str, str] = {}
    with Progress(len(items), "uploading", "doc", enabled=progress) as bar:
        for doc_id, job_id in zip(ids, stack.ingest_texts(items)):
            jobs[job_id] = doc_id
            bar.update()
    by_document: dict[str, str] = {}
    pending = dict(jobs)
    deadline = time.monotonic() + timeout_s
    with Progress(len(jobs), "ingesting", "doc", enabled=progress) as bar:
        while pending:
            for job_id in list(pending):
                state, document_id = stack.job_state(job_id)
                if state.endswith("SEARCHABLE"):
                    by_document[document_id] = pending.pop(job_id)
                    bar.update()
                else:
                    break  # jobs finish roughly in upload order: wait for this one before polling the rest
            if pending:
                if time.monotonic() > deadline:
                    raise EvalError(f"{len(pending)} ingest jobs did not finish in {timeout_s:.0f} s")
                time.sleep(poll_s)
    return by_document


def run_rest(
    dataset: Dataset,
    stack: RestStack,
    log: Callable[[str], None],
    *,
    modes: Sequence[str] = MODES,
    rerank: bool = False,
    progress: bool | None = None,
) -> dict[str, dict[str, float]]:
    corpus_id, by_document = ingest_dataset(dataset, stack, log, progress=progress)
    return query_rest(dataset, stack, corpus_id, by_document, modes=modes, rerank=rerank, progress=progress)


def ingest_dataset(
    dataset: Dataset, stack: RestStack, log: Callable[[str], None], *, progress: bool | None = None
) -> tuple[str, dict[str, str]]:
    """The dataset in a fresh corpus: its id and {document id: dataset id}."""
    corpus_id = stack.create_corpus(f"eval-{uuid.uuid4().hex[:8]}")
    log(f"ingesting {len(dataset.corpus)} documents into corpus {corpus_id}")
    return corpus_id, ingest(dataset, stack, corpus_id, progress=progress)


def query_rest(
    dataset: Dataset,
    stack: RestStack,
    corpus_id: str,
    by_document: Mapping[str, str],
    *,
    modes: Sequence[str] = MODES,
    rerank: bool = False,
    progress: bool | None = None,
    candidate: bool = False,
) -> dict[str, dict[str, float]]:
    """Every judged query in every mode, scored; ``candidate``: with the open model change's
    other vectors."""
    runs = [(mode, mode, False) for mode in modes] + ([(RERANKED, "HYBRID", True)] if rerank else [])
    rankings: dict[str, dict[str, list[str]]] = {label: {} for label, _, _ in runs}
    latencies: dict[str, list[float]] = {label: [] for label, _, _ in runs}
    with Progress(len(runs) * len(dataset.queries), "querying", "query", enabled=progress) as bar:
        for label, mode, reranked in runs:
            for query_id, text in dataset.queries.items():
                started = time.perf_counter()
                hits = stack.search(corpus_id, text, mode, RECALL_AT, rerank=reranked, candidate=candidate)
                latencies[label].append((time.perf_counter() - started) * 1000)
                rankings[label][query_id] = unique(by_document[h] for h in hits if h in by_document)
                bar.update()
    return score(dataset, rankings, latencies)


def main(options: argparse.Namespace) -> int:
    modes = _modes(options.modes)
    dataset = Dataset.load(Path(options.directory), split=options.split, limit=options.limit)
    token = options.token or _dev_token(options.tenant or f"eval-{uuid.uuid4().hex[:8]}")
    print(
        f"knowledge eval: {len(dataset.corpus)} documents, {len(dataset.queries)} judged queries "
        f"(qrels/{options.split}.tsv)",
        file=sys.stderr,
    )
    results = run_rest(
        dataset,
        RestStack(options.base_url, token),
        lambda m: print(m, file=sys.stderr),
        modes=modes,
        rerank=options.rerank,
        progress=True if options.progress else None,
    )
    table, ok = report(results)
    print(table)
    if options.json:
        payload = {
            "dataset": str(options.directory),
            "split": options.split,
            "documents": len(dataset.corpus),
            "queries": len(dataset.queries),
            "modes": results,
            "hybrid_ok": ok,
        }
        try:
            Path(options.json).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        except OSError as error:
            raise EvalError(f"cannot write {options.json} ({error.strerror})") from None
    return 0 if ok else 1


def _modes(raw: str) -> tuple[str, ...]:
    modes = tuple(dict.fromkeys(part.strip().upper() for part in raw.split(",") if part.strip()))
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        raise EvalError(f"--modes takes a comma list of {', '.join(MODES)}; got {raw!r}")
    return modes


def _dev_token(tenant: str) -> str:
    from knowledge_cli.devtoken import mint_local_token

    try:
        return mint_local_token(tenant, capabilities=["corpus.create", "corpus.read", "document.upload", "search"])
    except FileNotFoundError as error:
        raise EvalError(f"{error}; or pass --token") from None


def add_parser(commands) -> None:
    parser = commands.add_parser(
        "eval", help="nDCG@10, Recall@100, MRR@10 and latency per search mode on a BEIR-layout dataset"
    )
    parser.add_argument("directory", help="folder with corpus.jsonl, queries.jsonl and qrels/SPLIT.tsv")
    parser.add_argument("--split", default="test", help="the judgements to use: qrels/SPLIT.tsv (default test)")
    parser.add_argument("--limit", type=int, help="ingest only the judged documents plus this many others")
    parser.add_argument("--modes", default=",".join(MODES), help="comma list of VECTOR, LEXICAL, HYBRID (default all)")
    parser.add_argument("--rerank", action="store_true", help="also run HYBRID with rerank: true")
    parser.add_argument("--json", help="also write the figures to this file as JSON")
    parser.add_argument("--progress", action="store_true", help="show the progress bars even when not on a terminal")
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
