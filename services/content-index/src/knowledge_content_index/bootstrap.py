"""The one place that reads content-index's configuration and wires its adapters.

What it opens joins one ``AsyncExitStack``: a step that fails half-way through closes what
the steps before it opened, and a started app closes all of it, newest first, as it stops.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import structlog
from botocore.exceptions import BotoCoreError, ClientError
from knowledge_runtime import health
from knowledge_runtime.db.connect import connect_service_database
from knowledge_runtime.db.tenant_settings import enablement_gate
from knowledge_runtime.entrypoint import prepare
from knowledge_runtime.metrics import start_metrics_server
from knowledge_runtime.server import GrpcApp
from knowledge_runtime.settings import SettingsError

from knowledge_content_index.adapters.keyfile import KeyFileError, load_or_create_key
from knowledge_content_index.adapters.local_storage import LocalBlobStorage
from knowledge_content_index.adapters.postgres import PostgresBlobs
from knowledge_content_index.adapters.s3_storage import S3BlobStorage, S3Location, s3_clients
from knowledge_content_index.api.servicer import ContentIndexServicer, service_spec
from knowledge_content_index.config import ContentIndexSettings, ObjectStoreSettings
from knowledge_content_index.domain.identity import ContentKeyring
from knowledge_content_index.migration import BlobMigration
from knowledge_content_index.usecases import BlobPolicy, BlobUseCases

log = structlog.get_logger("knowledge.content_index")


def content_keyring(settings: ContentIndexSettings) -> ContentKeyring:
    if settings.content_key is not None:
        return ContentKeyring(settings.content_key)
    try:
        key = load_or_create_key(settings.key_file)
    except KeyFileError as error:
        raise SettingsError(f"KNOWLEDGE_CONTENT_KEY is unset and {error}") from None
    log.info("content_key_from_file", path=str(settings.key_file))
    return ContentKeyring(key)


def local_storage(settings: ContentIndexSettings) -> LocalBlobStorage:
    try:
        return LocalBlobStorage.create(settings.blob_root)
    except OSError as error:
        raise SettingsError(f"KNOWLEDGE_BLOB_ROOT: cannot create {settings.blob_root} ({error.strerror})") from None


async def open_object_store(
    store: ObjectStoreSettings, spool: LocalBlobStorage, resources: AsyncExitStack
) -> S3BlobStorage:
    """The S3 store, its clients closed with ``resources``. A bucket that the store says is
    missing or forbidden stops the start (a setting is wrong); a store that does not answer
    does not: the service starts, its readiness probe reports NOT_SERVING after its first
    failed checks, and SERVING once the store answers (restarting would not bring it back)."""
    main, probe = await resources.enter_async_context(s3_clients(endpoint=store.endpoint, region=store.region))
    storage = S3BlobStorage(main, S3Location(store.bucket, store.prefix), spool, probe=probe)
    try:
        await storage.ping()
    except ClientError as error:
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if status in (403, 404):
            what = "does not exist" if status == 404 else "is not open to these credentials"
            raise SettingsError(f"KNOWLEDGE_BLOB_S3_BUCKET: the bucket {store.bucket} {what}") from None
        log.warning("blob_store_unreachable_at_start", status=status)
    except (BotoCoreError, OSError, TimeoutError) as error:
        log.warning("blob_store_unreachable_at_start", error=type(error).__name__)
    return storage


async def build_app(settings: ContentIndexSettings | None = None) -> GrpcApp:
    settings = settings or ContentIndexSettings.from_env()
    verifier = prepare(settings.common)
    spool = local_storage(settings)
    keyring = content_keyring(settings)
    async with AsyncExitStack() as resources:
        storage: LocalBlobStorage | S3BlobStorage = spool
        readiness: list[health.Dependency] = []
        if settings.object_store is not None:
            storage = await open_object_store(settings.object_store, spool, resources)
            readiness.append(health.Dependency("blob store", storage.ping))
        # Uploads cut off by this process's predecessor (killed mid-write) leave .partial files
        # that no writer holds any more, and perhaps a multipart upload they were being sent
        # by: removed now, not at the next garbage collection.
        swept = await storage.sweep_abandoned()
        if swept:
            log.info("abandoned_uploads_removed", files=swept)
        db = await connect_service_database(settings.common, max_size=settings.database_pool_size)
        resources.push_async_callback(db.close)
        metrics = start_metrics_server(settings.common.metrics_port, settings.common.host)
        resources.push_async_callback(metrics.stop)
        policy = BlobPolicy(settings.common.max_upload_bytes, settings.gc_grace, settings.gc_min_age)
        # the operator's import roots: content-index fences them itself, whatever its caller checked
        blobs = BlobUseCases(PostgresBlobs(db), storage, keyring, policy, settings.import_roots)
        servicer = ContentIndexServicer(blobs)
        return GrpcApp.for_service(
            settings.common,
            [service_spec(servicer)],
            verifier,
            on_stop=[resources.pop_all().aclose],
            readiness=[health.database(db), *readiness],
            tenant_gate=enablement_gate(db, settings.common.tenants_enabled_by_default),
        )


@asynccontextmanager
async def open_migration(settings: ContentIndexSettings, target: ObjectStoreSettings) -> AsyncIterator[BlobMigration]:
    """``knowledge blobs migrate``: from the filesystem store under ``KNOWLEDGE_BLOB_ROOT`` to the
    object store ``target``, as content-index itself (its database role, its content key)."""
    if not settings.blob_root.is_dir():
        raise SettingsError(f"KNOWLEDGE_BLOB_ROOT: {settings.blob_root} is no directory (no blobs to move)")
    source = local_storage(settings)
    keyring = content_keyring(settings)
    async with AsyncExitStack() as resources:
        storage = await open_object_store(target, source, resources)
        db = await connect_service_database(settings.common, max_size=2)
        resources.push_async_callback(db.close)
        yield BlobMigration(PostgresBlobs(db), source, storage, keyring)
