"""The search service's settings, read once from ``KNOWLEDGE_*`` at start.

Settings depend on the domain only: every default is the domain's own value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from knowledge_runtime.breaker import DEFAULT_COOL_OFF_S
from knowledge_runtime.llm import LlmSettings, llm_settings
from knowledge_runtime.settings import PREFIX, CommonSettings, Env, SettingsError, service_address

from knowledge_search.domain.cache import DEFAULT_TTL_S
from knowledge_search.domain.fusion import DEFAULT_FUSION, Fusion, FusionMethod
from knowledge_search.domain.model import EQUAL_WEIGHTS, Weights
from knowledge_search.domain.prefetch import PREFETCH_DEADLINE_S
from knowledge_search.domain.relevance import Thresholds
from knowledge_search.domain.retrieval import (
    CHANNEL_DEPTH,
    DEFAULT_EF_SEARCH,
    DEFAULT_MAX_SCAN_TUPLES,
    RERANK_WINDOW,
    Bm25,
)

_TEXT_CONFIG = re.compile(r"^[a-z_][a-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class SearchSettings:
    common: CommonSettings
    embedder_address: str
    database_pool_size: int = 10
    bm25: Bm25 = Bm25()
    channel_depth: int = CHANNEL_DEPTH
    weights: Weights = EQUAL_WEIGHTS
    fusion: Fusion = DEFAULT_FUSION
    rerank: bool = False  # rerank when a request does not say
    rerank_window: int = RERANK_WINDOW
    ef_search: int = DEFAULT_EF_SEARCH
    max_scan_tuples: int = DEFAULT_MAX_SCAN_TUPLES
    thresholds: Thresholds = Thresholds()
    anonymise_names: tuple[str, ...] = ()
    llm: LlmSettings | None = None
    prefetch_deadline_s: float = PREFETCH_DEADLINE_S
    prefetch_data_catalog: bool = False
    cache_ttl_s: float = DEFAULT_TTL_S  # 0: no cache
    embedder_cool_off_s: float = DEFAULT_COOL_OFF_S  # the embedder breaker's; 0: no breaker

    @property
    def sign_internal_calls(self) -> bool:
        """KNOWLEDGE_SERVICE_KEY_PATH is set: EmbedQuery carries a token search signs itself."""
        return self.common.service_key is not None

    @classmethod
    def from_env(cls, env: Env | None = None) -> SearchSettings:
        """Each default is the one the configured object has, so the two cannot drift apart."""
        env = env or Env()
        bm25, relevance, weights = Bm25(), Thresholds(), EQUAL_WEIGHTS
        b = env.float("SEARCH_BM25_B", bm25.b, minimum=0.0, maximum=1.0)
        text_config = env.str("SEARCH_TEXT_CONFIG", bm25.text_config) or bm25.text_config
        if not _TEXT_CONFIG.match(text_config):
            raise SettingsError(
                f"{PREFIX}SEARCH_TEXT_CONFIG must be a text search configuration name, got {text_config!r}"
            )
        try:
            thresholds = Thresholds(
                high_top=env.float("SEARCH_RELEVANCE_HIGH", relevance.high_top, minimum=0.0),
                high_mean=env.float("SEARCH_RELEVANCE_HIGH_MEAN", relevance.high_mean, minimum=0.0),
                moderate_top=env.float("SEARCH_RELEVANCE_MODERATE", relevance.moderate_top, minimum=0.0),
                lexical_coverage=env.float(
                    "SEARCH_RELEVANCE_LEXICAL_COVERAGE", relevance.lexical_coverage, minimum=0.0
                ),
            )
        except ValueError as error:
            raise SettingsError(f"{PREFIX}SEARCH_RELEVANCE_*: {error}") from None
        assert weights.vector is not None and weights.lexical is not None  # EQUAL_WEIGHTS sets both
        vector_weight = env.float("SEARCH_VECTOR_WEIGHT", weights.vector, minimum=0.0)
        lexical_weight = env.float("SEARCH_LEXICAL_WEIGHT", weights.lexical, minimum=0.0)
        if vector_weight + lexical_weight <= 0:
            raise SettingsError(f"{PREFIX}SEARCH_VECTOR_WEIGHT and {PREFIX}SEARCH_LEXICAL_WEIGHT cannot both be 0")
        return cls(
            common=CommonSettings.from_env("search", env),
            embedder_address=service_address("embedder", env),
            database_pool_size=env.int("SEARCH_DATABASE_POOL_SIZE", 10, minimum=1, maximum=200),
            bm25=Bm25(
                k1=env.float("SEARCH_BM25_K1", bm25.k1, minimum=0.0),
                b=b,
                tiers=_tiers(env, bm25.tiers),
                text_config=text_config,
                common_fraction=env.float("SEARCH_BM25_COMMON_FRACTION", bm25.common_fraction, minimum=0.0),
                common_min_df=env.int("SEARCH_BM25_COMMON_MIN_DF", bm25.common_min_df, minimum=0),
            ),
            channel_depth=env.int("SEARCH_CHANNEL_DEPTH", CHANNEL_DEPTH, minimum=1, maximum=1000),
            weights=Weights(vector=vector_weight, lexical=lexical_weight),
            fusion=_fusion(env),
            rerank=env.bool("SEARCH_RERANK", False),
            rerank_window=env.int("SEARCH_RERANK_WINDOW", RERANK_WINDOW, minimum=1, maximum=256),
            ef_search=env.int("SEARCH_HNSW_EF_SEARCH", DEFAULT_EF_SEARCH, minimum=1, maximum=1000),
            max_scan_tuples=env.int("SEARCH_HNSW_MAX_SCAN_TUPLES", DEFAULT_MAX_SCAN_TUPLES, minimum=1),
            thresholds=thresholds,
            anonymise_names=_names(env),
            llm=llm_settings(env),
            prefetch_deadline_s=env.int(
                "PREFETCH_DEADLINE_MS", int(PREFETCH_DEADLINE_S * 1000), minimum=1, maximum=60_000
            )
            / 1000,
            prefetch_data_catalog=env.bool("PREFETCH_DATA_CATALOG", False),
            cache_ttl_s=env.float("SEARCH_CACHE_TTL_S", DEFAULT_TTL_S, minimum=0.0),
            embedder_cool_off_s=env.float("SEARCH_EMBEDDER_COOL_OFF_S", DEFAULT_COOL_OFF_S, minimum=0.0),
        )


def _fusion(env: Env) -> Fusion:
    if env.str("SEARCH_LEXICAL_CONFIDENCE") is not None:
        raise SettingsError(
            f"{PREFIX}SEARCH_LEXICAL_CONFIDENCE was replaced by {PREFIX}SEARCH_FUSION "
            "(coverage_rrf is what true meant, rrf what false meant)"
        )
    raw = (env.str("SEARCH_FUSION", DEFAULT_FUSION.method.value) or DEFAULT_FUSION.method.value).strip().lower()
    try:
        method = FusionMethod(raw)
    except ValueError:
        names = ", ".join(m.value for m in FusionMethod)
        raise SettingsError(f"{PREFIX}SEARCH_FUSION must be one of {names}, got {raw!r}") from None
    return Fusion(
        method=method,
        k=env.int("SEARCH_RRF_K", DEFAULT_FUSION.k, minimum=1, maximum=10000),
        alpha=env.float("SEARCH_FUSION_ALPHA", DEFAULT_FUSION.alpha, minimum=0.0, maximum=1.0),
        gate=env.float("SEARCH_FUSION_COVERAGE_GATE", DEFAULT_FUSION.gate, minimum=0.0, maximum=1.0),
    )


def _tiers(env: Env, default: tuple[float, float, float, float]) -> tuple[float, float, float, float]:
    raw = env.str("SEARCH_BM25_WEIGHTS")
    if raw is None:
        return default
    try:
        values = tuple(float(part) for part in raw.split(","))
    except ValueError:
        values = ()
    if len(values) != 4 or not all(0 < v < float("inf") for v in values):
        raise SettingsError(f"{PREFIX}SEARCH_BM25_WEIGHTS must be four positive numbers for D,C,B,A, got {raw!r}")
    return values


def _names(env: Env) -> tuple[str, ...]:
    names = [n.strip() for n in (env.str("SEARCH_ANONYMISE_NAMES", "") or "").split(",")]
    path = env.path("SEARCH_ANONYMISE_NAMES_FILE")
    if path is not None:
        try:
            names.extend(line.strip() for line in Path(path).read_text(encoding="utf-8").splitlines())
        except OSError:
            raise SettingsError(f"{PREFIX}SEARCH_ANONYMISE_NAMES_FILE: cannot read {path}") from None
    return tuple(sorted({n for n in names if n and not n.startswith("#")}))
