"""``knowledge models change|status|swap|rollback|cancel|eval-set``: changing the deployment's
embedding model through the REST API (a ``models.admin`` token).

``eval-set put DIR`` uploads a BEIR-layout set's documents into a fresh corpus (as ``knowledge
eval`` does) and stores its judged queries on the service, relevance by the new documents' ids:
when a change's new vectors are complete the service runs every stored set on both models and
swaps, or holds the change, by itself.

``swap --eval DIR`` scores a BEIR-layout evaluation set with both models' vectors the way
``knowledge eval`` scores one (its documents are ingested during the change, so they get both)
and sends both figures to the service, whose gate decides; ``--force`` swaps anyway (recorded).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from knowledge_cli.client import EXIT_CODES, FAILED, OK, ApiError, Client
from knowledge_cli.rest_command import common_options, print_json, rest_command

STATE_PREFIX = "MODEL_CHANGE_STATE_"


def add_parsers(commands) -> None:
    epilog = "exit codes: " + "; ".join(f"{code} {text}" for code, text in EXIT_CODES.items())
    models = commands.add_parser("models", help="change the embedding model, gated by an evaluation", epilog=epilog)
    verbs = models.add_subparsers(dest="models_command", required=True)

    def verb(name: str, help_text: str, run):
        parser = verbs.add_parser(name, help=help_text, epilog=epilog)
        common_options(parser)
        parser.set_defaults(run=rest_command(run))
        return parser

    change = verb("change", "start re-embedding every chunk with the embedder's next model", _change)
    change.add_argument("--to", required=True, dest="to_model", help="the model id (the embedder's next model)")
    verb("status", "the open (or latest) change: state, k/n chunks, rate, time left, the gate's figures", _status)
    swap = verb("swap", "evaluate both models, then swap if the gate allows", _swap)
    swap.add_argument("--eval", dest="eval_dir", help="a BEIR-layout folder (corpus.jsonl, queries.jsonl, qrels/)")
    swap.add_argument("--split", default="test", help="qrels/SPLIT.tsv (default test)")
    swap.add_argument("--force", action="store_true", help="swap even if the gate says no (recorded)")
    swap.add_argument("--margin", type=float, default=0.0, help="most HYBRID nDCG@10 may drop (default 0.005)")
    verb("rollback", "search reads the old model again (until the grace period ends)", _rollback)
    verb("cancel", "stop a change before its swap", _cancel)
    sets = verbs.add_parser("eval-set", help="the evaluation sets the service gates a change by", epilog=epilog)
    set_verbs = sets.add_subparsers(dest="eval_set_command", required=True)
    put = set_verbs.add_parser("put", help="upload a BEIR-layout set's documents and store its queries", epilog=epilog)
    common_options(put)
    put.set_defaults(run=rest_command(_put_set))
    put.add_argument("directory", help="a BEIR-layout folder (corpus.jsonl, queries.jsonl, qrels/)")
    put.add_argument("--split", default="test", help="qrels/SPLIT.tsv (default test)")
    put.add_argument("--name", help="the set's name (default: the folder's name)")
    delete = set_verbs.add_parser("delete", help="remove a stored set", epilog=epilog)
    common_options(delete)
    delete.set_defaults(run=rest_command(_delete_set))
    delete.add_argument("name")


def _line(change: dict) -> str:
    state = str(change.get("state", "")).removeprefix(STATE_PREFIX).lower()
    done, total = int(change.get("chunks_done", 0)), int(change.get("chunks_total", 0))
    rate = float(change.get("chunks_per_second", 0.0))
    eta = change.get("eta_seconds")
    left = f"\t{float(eta):.0f} s left" if eta is not None and state == "re_embedding" else ""
    text = (
        f"{change.get('change_id', '')}\t{state}\t{change.get('from_model', '')} -> {change.get('to_model', '')}"
        f"\t{done}/{total} chunks\t{rate:.1f}/s{left}\treading {change.get('reading_model', '')}\n"
    )
    if change.get("gate_reason"):
        forced = " (forced)" if change.get("forced") else ""
        text += f"gate\t{change['gate_reason']}{forced}\n"
    return text


def _show(out: TextIO, options, change: dict) -> int:
    if options.json:
        print_json(out, change)
    else:
        out.write(_line(change))
    return OK


def _change(client: Client, options, out: TextIO) -> int:
    return _show(out, options, client.start_model_change(options.to_model)["change"])


def _status(client: Client, options, out: TextIO) -> int:
    return _show(out, options, client.model_change())


def _rollback(client: Client, options, out: TextIO) -> int:
    return _show(out, options, client.end_model_change("rollback")["change"])


def _cancel(client: Client, options, out: TextIO) -> int:
    return _show(out, options, client.end_model_change("cancel")["change"])


def _swap(client: Client, options, out: TextIO) -> int:
    body: dict[str, object] = {"force": options.force, "margin": options.margin}
    if options.eval_dir:
        current, candidate = evaluate_both(client, options)
        body |= {"current": _evaluation(current), "candidate": _evaluation(candidate)}
    change = client.swap_model(body)["change"]
    _show(out, options, change)
    return OK if change.get("state", "").endswith("SWAPPED") else FAILED


def evaluate_both(client: Client, options) -> tuple[dict, dict]:
    """``knowledge eval``'s figures on the set, once with the current vectors, once with the
    change's (the same corpus, ingested once)."""
    from knowledge_cli.evaluate import Dataset, EvalError, RestStack, ingest_dataset, query_rest, report

    try:
        dataset = Dataset.load(Path(options.eval_dir), split=options.split)
        stack = RestStack(client.base_url, client.token, timeout_s=options.timeout)
        corpus_id, by_document = ingest_dataset(dataset, stack, lambda m: print(m, file=sys.stderr))
        figures = []
        for candidate in (False, True):
            results = query_rest(dataset, stack, corpus_id, by_document, candidate=candidate)
            print(("candidate" if candidate else "current") + "\n" + report(results)[0], file=sys.stderr)
            figures.append(results)
    except EvalError as error:
        raise ApiError(str(error), FAILED) from None
    return figures[0], figures[1]


def _evaluation(results: dict) -> dict:
    return {
        "modes": {
            mode: {"ndcg_at_10": r["ndcg@10"], "recall_at_100": r["recall@100"]}
            for mode, r in results.items()
            if "ndcg@10" in r
        }
    }


def set_queries(dataset, by_document: dict[str, str]) -> list[dict]:
    """The dataset's judged queries with relevance by the uploaded documents' ids."""
    document_of = {dataset_id: document_id for document_id, dataset_id in by_document.items()}
    return [
        {
            "query_id": query_id,
            "text": text,
            "relevant": {document_of[d]: grade for d, grade in dataset.qrels[query_id].items() if d in document_of},
        }
        for query_id, text in dataset.queries.items()
    ]


def _put_set(client: Client, options, out: TextIO) -> int:
    from knowledge_cli.evaluate import Dataset, EvalError, RestStack, ingest_dataset

    directory = Path(options.directory)
    name = options.name or directory.resolve().name.lower()
    try:
        dataset = Dataset.load(directory, split=options.split)
        stack = RestStack(client.base_url, client.token, timeout_s=options.timeout)
        corpus_id, by_document = ingest_dataset(dataset, stack, lambda m: print(m, file=sys.stderr))
    except EvalError as error:
        raise ApiError(str(error), FAILED) from None
    stored = client.put_evaluation_set(name, corpus_id, set_queries(dataset, by_document))
    if options.json:
        print_json(
            out, {k: v for k, v in stored.items() if k != "queries"} | {"queries": len(stored.get("queries", []))}
        )
    else:
        out.write(f"{stored['name']}\tcorpus {stored['corpus_id']}\t{len(stored.get('queries', []))} queries\n")
    return OK


def _delete_set(client: Client, options, out: TextIO) -> int:
    client.delete_evaluation_set(options.name)
    out.write(f"deleted {options.name}\n")
    return OK
