"""The ingest service's settings, read once from ``KNOWLEDGE_*`` at start.

The upload cap, the metrics port and the key ingest signs its calls to content-index and the
embedder with are in ``common`` (runtime ``CommonSettings``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from knowledge_runtime.chunking import DEFAULT_WINDOW_SHARE
from knowledge_runtime.imports import ImportRoots
from knowledge_runtime.process import usable_cores
from knowledge_runtime.settings import CommonSettings, Env, SettingsError, service_address

from knowledge_ingest.domain.extraction import (
    DEFAULT_EXTRACTION_MEMORY_BUDGET,
    DEFAULT_OCR_MAX_PAGES,
    DEFAULT_OCR_PAGE_SECONDS,
    ChildAllowance,
    ExtractionLimits,
    child_allowance,
)
from knowledge_ingest.domain.fetching import parse_allow_hosts
from knowledge_ingest.domain.model_change import DEFAULT_NDCG_MARGIN
from knowledge_ingest.domain.webhooks import DEFAULT_DISABLE_AFTER_S, DEFAULT_RETRY_SCHEDULE_S, RetryPolicy

DEFAULT_EVENTS_RETENTION_S = 7 * 24 * 3600.0
DEFAULT_TOMBSTONE_RETENTION_DAYS = 90.0
WORKERS_PER_CORE = 2
MAX_WORKERS = 64


MAX_RETRY_STEPS = 20


def parse_schedule(text: str) -> tuple[float, ...]:
    """``KNOWLEDGE_WEBHOOK_RETRY_SCHEDULE_S``: seconds, comma-separated, each > 0, at most 20."""
    try:
        steps = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        steps = ()
    if not steps or len(steps) > MAX_RETRY_STEPS or not all(0 < s <= 86400 for s in steps):
        raise SettingsError(
            "KNOWLEDGE_WEBHOOK_RETRY_SCHEDULE_S: 1 to 20 waits in seconds, comma-separated, each in (0, 86400]"
        )
    return steps


DEFAULT_MODEL_CHANGE_GRACE_S = 7 * 86400.0  # a week to notice that the new model answers worse


@dataclass(frozen=True, slots=True)
class WebhookSettings:
    allow_hosts: frozenset[str] = frozenset()  # host / host:port a webhook may be at though not public (http too)
    key_path: Path = Path("webhook.key")  # the key webhook secrets are sealed with
    create_key: bool = False  # the default path: made on first start when missing (a single node's)
    retry: RetryPolicy = RetryPolicy()
    timeout_s: float = 10.0  # one delivery attempt, answer included
    concurrency: int = 16  # webhooks this replica delivers to at once; 0: none

    @property
    def lease_s(self) -> float:
        """How long a replica holds a webhook without writing: well past one attempt's timeout, so
        a holder is never overtaken in the middle of an attempt."""
        return 2 * self.timeout_s + 10.0

    @classmethod
    def from_env(cls, env: Env, data_dir: Path) -> WebhookSettings:
        schedule = ",".join(f"{s:g}" for s in DEFAULT_RETRY_SCHEDULE_S)
        return cls(
            allow_hosts=parse_allow_hosts(env.str("WEBHOOK_ALLOW_HOSTS") or ""),
            key_path=env.path("WEBHOOK_KEY_PATH") or data_dir / "keys" / "webhook.key",
            create_key=env.path("WEBHOOK_KEY_PATH") is None,
            retry=RetryPolicy(
                parse_schedule(env.str("WEBHOOK_RETRY_SCHEDULE_S") or schedule),
                env.float("WEBHOOK_DISABLE_AFTER_S", DEFAULT_DISABLE_AFTER_S, minimum=1.0),
            ),
            timeout_s=env.float("WEBHOOK_TIMEOUT_S", 10.0, minimum=0.1, maximum=120.0),
            concurrency=env.int("WEBHOOK_CONCURRENCY", 16, minimum=0, maximum=1000),
        )


def default_workers(cores: int) -> int:
    """Job workers when ``KNOWLEDGE_INGEST_WORKERS`` is unset: two per core, at least 2, at most 64.
    A worker spends most of a job waiting (for content-index, the embedder, PostgreSQL), so more
    workers than cores keep the embedder's queue fed with the next small texts while others store."""
    return max(2, min(MAX_WORKERS, WORKERS_PER_CORE * cores))


@dataclass(frozen=True, slots=True)
class IngestSettings:
    common: CommonSettings
    database_pool_size: int
    content_index_address: str
    embedder_address: str
    search_address: str  # the model change's evaluation asks search, as a user's search would
    workers: int
    lease_s: float
    max_attempts: int
    max_interruptions: int
    retry_base_s: float
    chunk_max_chars: int  # 0: chunks are sized in the embedding model's tokens (the two below)
    embed_batch: int
    embed_window: int
    ocr_max_pages: int  # PDF pages without a usable text layer that one file may have read by OCR
    ocr_page_seconds: float  # one page's OCR
    fetch_allow_hosts: frozenset[str]  # host / host:port that IngestUrl may fetch though not public
    fetch_timeout_s: float  # one IngestUrl fetch, redirects and body included
    events_retention_s: float  # how long WatchEvents can resume from an event's cursor
    events_heartbeat_s: float  # a quiet WatchEvents stream sends a heartbeat this often
    import_roots: ImportRoots = field(default_factory=ImportRoots)  # the operator's import roots (configuration only)
    import_scan_interval_s: float = 3600.0  # between scheduled passes over a bound root; 0: none
    metrics_max_tenants: int = 20  # tenants with their own knowledge_tenant_* series; the rest are "_other"
    metrics_tenants_every_s: float = 60.0  # how often those totals are counted
    tombstone_retention_days: float = (
        DEFAULT_TOMBSTONE_RETENTION_DAYS  # how long a removed document's tombstone is listed
    )
    # Every extraction child's address space together (``child_allowance`` shares it out).
    extraction_memory_budget_bytes: int = DEFAULT_EXTRACTION_MEMORY_BUDGET
    chunk_max_tokens: int = 0  # 0: chunk_window_share of the embedder's window
    chunk_window_share: float = DEFAULT_WINDOW_SHARE
    webhooks: WebhookSettings = field(default_factory=WebhookSettings)
    # After a model change's swap, how long the old vectors stay for a rollback.
    model_change_grace_s: float = DEFAULT_MODEL_CHANGE_GRACE_S
    model_change_batch: int = 64  # chunks a model change re-embeds per step
    model_change_every_s: float = 1.0  # between steps when there is nothing to do at once
    # How much HYBRID nDCG@10 the stored evaluation sets may lose for a change to swap on its own.
    model_change_margin: float = DEFAULT_NDCG_MARGIN

    @classmethod
    def from_env(cls, env: Env | None = None) -> IngestSettings:
        env = env or Env()
        common = CommonSettings.from_env("ingest", env)
        return cls(
            common=common,
            database_pool_size=env.int("INGEST_DATABASE_POOL_SIZE", 10, minimum=2, maximum=200),
            content_index_address=service_address("content-index", env),
            embedder_address=service_address("embedder", env),
            search_address=service_address("search", env),
            workers=env.int("INGEST_WORKERS", default_workers(usable_cores()), minimum=0, maximum=MAX_WORKERS),
            lease_s=env.float("INGEST_LEASE_S", 30.0, minimum=1.0),
            max_attempts=env.int("INGEST_MAX_ATTEMPTS", 5, minimum=1, maximum=100),
            max_interruptions=env.int("INGEST_MAX_INTERRUPTIONS", 10, minimum=1, maximum=1000),
            retry_base_s=env.float("INGEST_RETRY_BASE_S", 2.0, minimum=0.0),
            chunk_max_chars=env.int("CHUNK_MAX_CHARS", 0, minimum=200, maximum=20000),
            chunk_max_tokens=env.int("CHUNK_MAX_TOKENS", 0, minimum=0, maximum=32768),
            chunk_window_share=env.float("CHUNK_WINDOW_SHARE", DEFAULT_WINDOW_SHARE, minimum=0.1, maximum=1.0),
            embed_batch=env.int("INGEST_EMBED_BATCH", 32, minimum=1, maximum=1024),
            embed_window=env.int("INGEST_EMBED_WINDOW", 4, minimum=1, maximum=64),
            ocr_max_pages=env.int("OCR_MAX_PAGES", DEFAULT_OCR_MAX_PAGES, minimum=0, maximum=5000),
            ocr_page_seconds=env.float("OCR_PAGE_SECONDS", DEFAULT_OCR_PAGE_SECONDS, minimum=1.0),
            fetch_allow_hosts=parse_allow_hosts(env.str("FETCH_ALLOW_HOSTS") or ""),
            fetch_timeout_s=env.float("FETCH_TIMEOUT_S", 30.0, minimum=1.0),
            events_retention_s=env.float("EVENTS_RETENTION_S", DEFAULT_EVENTS_RETENTION_S, minimum=1.0),
            events_heartbeat_s=env.float("EVENTS_HEARTBEAT_S", 30.0, minimum=0.1),
            import_roots=ImportRoots.from_env(env),
            import_scan_interval_s=env.float("IMPORT_SCAN_INTERVAL_S", 3600.0, minimum=0.0),
            metrics_max_tenants=env.int("METRICS_MAX_TENANTS", 20, minimum=1, maximum=1000),
            metrics_tenants_every_s=env.float("METRICS_TENANTS_EVERY_S", 60.0, minimum=1.0),
            tombstone_retention_days=env.float(
                "TOMBSTONE_RETENTION_DAYS", DEFAULT_TOMBSTONE_RETENTION_DAYS, minimum=0.0
            ),
            extraction_memory_budget_bytes=env.int(
                "EXTRACTION_MEMORY_BUDGET_BYTES", DEFAULT_EXTRACTION_MEMORY_BUDGET, minimum=256 * 1024 * 1024
            ),
            webhooks=WebhookSettings.from_env(env, common.data_dir),
            model_change_grace_s=env.float("MODEL_CHANGE_GRACE_S", DEFAULT_MODEL_CHANGE_GRACE_S, minimum=0.0),
            model_change_batch=env.int("MODEL_CHANGE_BATCH", 64, minimum=1, maximum=2048),
            model_change_every_s=env.float("MODEL_CHANGE_EVERY_S", 1.0, minimum=0.05),
            model_change_margin=env.float("MODEL_CHANGE_MARGIN", DEFAULT_NDCG_MARGIN, minimum=0.0, maximum=1.0),
        )

    def __post_init__(self) -> None:
        if self.chunk_max_chars and self.chunk_max_tokens:
            raise SettingsError(
                "KNOWLEDGE_CHUNK_MAX_CHARS and KNOWLEDGE_CHUNK_MAX_TOKENS: set one (characters, or the model's tokens)"
            )

    def extraction_limits(self) -> ExtractionLimits:
        return ExtractionLimits(max_ocr_pages=self.ocr_max_pages, ocr_page_seconds=self.ocr_page_seconds)

    def extraction_allowance(self) -> ChildAllowance:
        """Extraction runs in the workers (one file each at a time): the budget is theirs."""
        return child_allowance(self.extraction_memory_budget_bytes, self.workers)
