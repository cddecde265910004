"""The one place that reads search's configuration and wires its adapters.

What it opens joins one ``AsyncExitStack``: a step that fails half-way through closes what
the steps before it opened, and a started app closes all of it, newest first, as it stops.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack

from knowledge_runtime import health
from knowledge_runtime.breaker import slow_within
from knowledge_runtime.db.connect import connect_service_database
from knowledge_runtime.db.tenant_settings import PostgresLlmBudget, enablement_gate
from knowledge_runtime.entrypoint import prepare
from knowledge_runtime.metrics import start_metrics_server
from knowledge_runtime.server import GrpcApp

from knowledge_search.adapters.embedder import GrpcQueryEmbedder, breaking
from knowledge_search.adapters.llm import ChatCompletionsSynthesiser
from knowledge_search.adapters.memory_cache import TtlCache
from knowledge_search.adapters.postgres import (
    PostgresChunkIndex,
    PostgresCostLedger,
    PostgresVectorSpaces,
    scan_settings,
)
from knowledge_search.adapters.system_corpora import PostgresSystemCorpora
from knowledge_search.agent_usecases import ContextUseCases, PrefetchUseCases
from knowledge_search.api.servicer import SearchServicer, service_spec
from knowledge_search.config import SearchSettings
from knowledge_search.domain.anonymise import Anonymiser
from knowledge_search.domain.answer import ExtractiveSynthesiser
from knowledge_search.domain.ports import Synthesiser
from knowledge_search.usecases import AnswerUseCases, SearchUseCases


def _embed_tokens(settings: SearchSettings) -> Callable[[str], str] | None:
    """Tokens for EmbedQuery signed by this service, when it has a key; else the caller's is forwarded."""
    if not settings.sign_internal_calls:
        return None
    from knowledge_runtime.service_tokens import ServiceTokenSigner

    signer = ServiceTokenSigner.for_service(settings.common)
    return lambda tenant: signer.token(tenant, ("embed",))


async def build_app(settings: SearchSettings | None = None) -> GrpcApp:
    settings = settings or SearchSettings.from_env()
    verifier = prepare(settings.common)
    token_for = _embed_tokens(settings)
    async with AsyncExitStack() as resources:
        db = await connect_service_database(
            settings.common,
            max_size=settings.database_pool_size,
            server_settings=scan_settings(settings.ef_search, settings.max_scan_tuples),
        )
        resources.push_async_callback(db.close)
        # Behind a breaker: a stopped embedder costs one deadline per cool-off, not every request.
        # Its silence stays below the pre-fetch deadline, or a call given up on there would never open it.
        embedder = breaking(
            GrpcQueryEmbedder(settings.embedder_address, token_for=token_for),
            settings.embedder_cool_off_s,
            slow_s=slow_within(settings.prefetch_deadline_s),
        )
        resources.push_async_callback(embedder.close)
        index = PostgresChunkIndex(
            db, bm25=settings.bm25, ef_search=settings.ef_search, max_scan_tuples=settings.max_scan_tuples
        )
        system_corpora = PostgresSystemCorpora(db)
        searches = SearchUseCases(
            index=index,
            embedder=embedder,
            thresholds=settings.thresholds,
            channel_depth=settings.channel_depth,
            default_weights=settings.weights,
            fusion=settings.fusion,
            reranker=embedder,  # the embedder holds the reranking model too; it refuses when none is configured
            rerank_default=settings.rerank,
            rerank_window=settings.rerank_window,
            system_corpora=system_corpora,
            cache=TtlCache(settings.cache_ttl_s) if settings.cache_ttl_s > 0 else None,
            spaces=PostgresVectorSpaces(db),
        )
        synthesiser: Synthesiser
        llm: ChatCompletionsSynthesiser | None = None
        if settings.llm is not None:
            llm = ChatCompletionsSynthesiser(
                settings.llm.url,
                settings.llm.model,
                api_key=settings.llm.api_key,
                timeout_s=settings.llm.timeout_s,
                price_input_per_1k=settings.llm.price_input_per_1k,
                price_output_per_1k=settings.llm.price_output_per_1k,
            )
            resources.push_async_callback(llm.close)
            synthesiser = llm
        else:
            synthesiser = ExtractiveSynthesiser()
        metrics = start_metrics_server(settings.common.metrics_port, settings.common.host)
        resources.push_async_callback(metrics.stop)
        answers = AnswerUseCases(
            searcher=searches,
            synthesiser=synthesiser,
            anonymiser=Anonymiser(settings.anonymise_names),
            ledger=PostgresCostLedger(db),
            # an LLM's answers fall back to the extractive synthesiser once the tenant's budget is spent
            budget=PostgresLlmBudget(db) if settings.llm is not None else None,
            fallback=ExtractiveSynthesiser() if settings.llm is not None else None,
            condenser=llm,  # the model condenses a follow-up and its history into one query
        )
        prefetches = PrefetchUseCases(
            searches,
            system_corpora,
            deadline_s=settings.prefetch_deadline_s,
            data_catalog=settings.prefetch_data_catalog,
        )
        servicer = SearchServicer(searches, answers, ContextUseCases(answers), prefetches)
        return GrpcApp.for_service(
            settings.common,
            [service_spec(servicer)],
            verifier,
            on_stop=[resources.pop_all().aclose],
            readiness=[health.database(db)],
            tenant_gate=enablement_gate(db, settings.common.tenants_enabled_by_default),
            scope_resolver=index.reader,
        )
