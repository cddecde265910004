"""The one place that reads the embedder's configuration and wires its adapters.

What it opens joins one ``AsyncExitStack``: a step that fails half-way through closes what
the steps before it opened, and a started app closes all of it, newest first, as it stops.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path

import structlog
from knowledge_runtime import health
from knowledge_runtime.db.connect import connect_service_database
from knowledge_runtime.db.tenant_settings import enablement_gate
from knowledge_runtime.entrypoint import prepare
from knowledge_runtime.errors import DomainError
from knowledge_runtime.metrics import start_metrics_server
from knowledge_runtime.process import usable_cores
from knowledge_runtime.server import GrpcApp
from knowledge_runtime.settings import PREFIX, SettingsError

from knowledge_embedder.adapters.backend_timing import ChoiceCache, chosen, fingerprint, time_backends
from knowledge_embedder.adapters.devices import pick_device
from knowledge_embedder.adapters.model_files import model_prompts, onnx_unsupported, resolve_model_dir, window
from knowledge_embedder.adapters.postgres import PostgresEmbeddings, check_dimension
from knowledge_embedder.api.servicer import EmbedderServicer, service_spec
from knowledge_embedder.batching.queue import BatchQueue
from knowledge_embedder.batching.runner import BatchRunner
from knowledge_embedder.config import EmbedderSettings, RemoteSettings, prompts_of
from knowledge_embedder.domain.backend import Timing, auto_candidates
from knowledge_embedder.domain.model import Price, Prompts
from knowledge_embedder.domain.ports import Encoder, Reranker
from knowledge_embedder.usecases import EmbedderUseCases

log = structlog.get_logger("knowledge.embedder")


def backend_for(settings: EmbedderSettings, model_dir: Path, measure: Callable[[], Timing]) -> str:
    """The backend to load: the configured one; for ``auto``, torch on an accelerator or for a
    model the int8 export does not support, else (on a CPU) the faster of the two as ``measure``
    times them, or as cached for this model and machine. Logs the choice with both rates."""
    if settings.backend != "auto":
        return settings.backend
    candidates = auto_candidates(
        onnx_model=onnx_unsupported(model_dir) is None, device=lambda: pick_device(settings.device)
    )
    if len(candidates) == 1:
        return candidates[0]
    lanes = settings.inference_lanes or usable_cores()
    machine = fingerprint(
        model_id=settings.model_id,
        model_dir=model_dir,
        window=window(model_dir, settings.max_seq_length),
        batch_size=settings.batch_size,
        lanes=lanes,
        cores=usable_cores(),
    )
    choice, cached = chosen(ChoiceCache(settings.common.data_dir), machine, measure)
    log.info(
        "embedding_backend_chosen",
        backend=choice.backend,
        torch_per_s=round(choice.timing.torch_per_s, 2),
        int8_per_s=round(choice.timing.int8_per_s, 2),
        cosine=round(choice.timing.cosine, 4),
        cached=cached,
    )
    return choice.backend


def load_encoder(settings: EmbedderSettings) -> Encoder:
    """The configured model on the configured (or, for ``auto``, the chosen) backend, warmed up.
    Blocking: call it off the loop."""
    # Never reach a model hub at run time, whatever the environment says.
    os.environ["HF_HUB_OFFLINE"] = "1"
    model_dir = resolve_model_dir(settings.model)
    if settings.remote is not None:
        return _remote_encoder(settings, settings.remote, model_dir)
    loaded: dict[str, Encoder] = {}  # what the timing loaded: the chosen one is kept, not loaded again

    def load(backend: str) -> Encoder:
        if backend not in loaded:
            loaded[backend] = _encoder(settings, model_dir, backend)
        return loaded[backend]

    def measure() -> Timing:
        return time_backends(load("torch"), load("onnx-int8"))

    encoder = load(backend_for(settings, model_dir, measure))
    loaded.clear()  # the other backend, if timed, goes
    encoder.encode(["warm-up"])
    return encoder


def _remote_encoder(settings: EmbedderSettings, remote: RemoteSettings, model_dir: Path) -> Encoder:
    """The remote server behind the model's local tokenizer; its dimension asked of it once (the
    retries and backoff included): a server that cannot answer at start stops the process, naming
    the setting, rather than serve with no model."""
    from knowledge_embedder.adapters.remote_encoder import RemoteEncoder

    encoder = RemoteEncoder(
        settings.model_id, model_dir, remote, max_seq_length=settings.max_seq_length, batch_size=settings.batch_size
    )
    try:
        encoder.probe()
    except DomainError as error:
        encoder.close()
        raise SettingsError(f"{PREFIX}EMBEDDER_REMOTE_URL: {error.message}") from None
    return encoder


def prompts_for(settings: EmbedderSettings) -> Prompts:
    """The configured prompts, else the model's own configuration's (none for most models)."""
    if settings.prompts is not None:
        return settings.prompts
    return prompts_of(model_prompts(resolve_model_dir(settings.model)))


def _encoder(settings: EmbedderSettings, model_dir: Path, backend: str) -> Encoder:
    if backend == "onnx-int8":
        from knowledge_embedder.adapters.onnx_encoder import OnnxEncoder

        return OnnxEncoder(
            settings.model_id,
            model_dir,
            cache_root=settings.common.data_dir,
            max_seq_length=settings.max_seq_length,
            batch_size=settings.batch_size,
            lanes=settings.inference_lanes or usable_cores(),
        )
    from knowledge_embedder.adapters.torch_encoder import TorchEncoder

    return TorchEncoder(
        settings.model_id,
        model_dir,
        device=settings.device,
        max_seq_length=settings.max_seq_length,
        batch_size=settings.batch_size,
    )


def load_reranker(settings: EmbedderSettings) -> Reranker | None:
    """The configured cross-encoder (a local directory, never downloaded), warmed up; None when unset."""
    if settings.rerank_model is None:
        return None
    os.environ["HF_HUB_OFFLINE"] = "1"
    from knowledge_embedder.adapters.torch_reranker import TorchReranker
    from knowledge_embedder.domain.model import RerankPair

    model_dir = resolve_model_dir(settings.rerank_model, setting="KNOWLEDGE_RERANK_MODEL")
    reranker = TorchReranker(
        settings.rerank_model_id,
        model_dir,
        device=settings.device,
        max_length=settings.rerank_max_length,
        batch_size=settings.batch_size,
    )
    reranker.score([RerankPair("warm-up", "warm-up")])
    return reranker


def _loaded(settings: EmbedderSettings) -> Encoder:
    encoder = load_encoder(settings)
    log.info(
        "model_loaded",
        model=settings.model_id,
        backend=encoder.backend,
        configured_backend=settings.backend,
        device=encoder.device,
        dimension=encoder.dimension,
        max_seq_length=encoder.max_seq_length,
    )
    return encoder


def _serving(
    settings: EmbedderSettings,
    encoder: Encoder,
    store: PostgresEmbeddings,
    resources: AsyncExitStack,
    reranker: Reranker | None = None,
) -> EmbedderUseCases:
    """One model's queue, runner and use cases, started; stopped (and closed) with ``resources``."""
    prompts = prompts_for(settings)
    log.info("model_prompts", model=settings.model_id, query=bool(prompts.query), passage=bool(prompts.passage))
    runner = BatchRunner(
        BatchQueue(
            max_batch_tokens=settings.max_batch_tokens,
            max_queue=settings.max_queue,
            bulk_batch_tokens=settings.bulk_batch_tokens_on(encoder.device),
            interactive_burst=settings.interactive_burst,
        ),
        encoder,
        reranker=reranker,
        lanes=encoder.lanes,
        prompts=prompts,
    )
    usecases = EmbedderUseCases(
        encoder,
        runner,
        store,
        Price(per_1k_tokens=settings.price_per_1k_tokens, currency=settings.currency),
        reranker=reranker,
        rerank_price=Price(per_1k_tokens=settings.rerank_price_per_1k_tokens, currency=settings.currency),
        prompts=prompts,
    )
    resources.callback(usecases.close)  # closed after the runner stopped: nothing embeds any more
    runner.start()
    resources.push_async_callback(runner.stop)
    return usecases


async def build_app(settings: EmbedderSettings | None = None) -> GrpcApp:
    settings = settings or EmbedderSettings.from_env()
    verifier = prepare(settings.common)
    encoder = await asyncio.to_thread(_loaded, settings)
    # The next model, when configured, beside the current one: a model change embeds with it.
    next_encoder = await asyncio.to_thread(_loaded, settings.next) if settings.next is not None else None
    reranker = await asyncio.to_thread(load_reranker, settings)
    if reranker is not None:
        log.info("reranker_loaded", model=settings.rerank_model_id, device=reranker.device)
    async with AsyncExitStack() as resources:
        for loaded in (encoder, next_encoder):
            close = getattr(loaded, "close", None)  # a remote encoder's connections
            if close is not None:
                resources.callback(close)  # run last: after the runners stopped
        db = await connect_service_database(settings.common, max_size=settings.database_pool_size)
        resources.push_async_callback(db.close)
        await check_dimension(db, encoder.dimension)
        metrics = start_metrics_server(settings.common.metrics_port, settings.common.host)
        resources.push_async_callback(metrics.stop)
        store = PostgresEmbeddings(db)
        models = [_serving(settings, encoder, store, resources, reranker)]
        if settings.next is not None and next_encoder is not None:
            if next_encoder.model_id == encoder.model_id:
                raise SettingsError(f"{PREFIX}EMBEDDING_NEXT_MODEL_ID must differ from the current model's id")
            models.append(_serving(settings.next, next_encoder, store, resources))
        servicer = EmbedderServicer(models, max_batch_tokens=settings.max_batch_tokens)
        return GrpcApp.for_service(
            settings.common,
            [service_spec(servicer)],
            verifier,
            on_stop=[resources.pop_all().aclose],
            readiness=[health.database(db)],
            tenant_gate=enablement_gate(db, settings.common.tenants_enabled_by_default),
        )
