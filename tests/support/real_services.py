"""Real content-index and embedder servers (the real model) on free ports, and the environment
an ingest beside them runs with: what the tests of the whole ingest chain share."""

from __future__ import annotations

from knowledge_cli.stack_settings import default_embedding_model
from knowledge_content_index.bootstrap import build_app as content_index_app
from knowledge_content_index.config import ContentIndexSettings
from knowledge_embedder.bootstrap import build_app as embedder_app
from knowledge_embedder.config import EmbedderSettings
from knowledge_runtime.registry import service as registered
from knowledge_runtime.server import GrpcApp
from knowledge_runtime.settings import Env


def base_env(pg, keys_dir, tmp_path, service: str) -> dict[str, str]:
    return {
        "KNOWLEDGE_DATA_DIR": str(tmp_path),
        "KNOWLEDGE_DATABASE_URL": pg.url(user=registered(service).database_role),
        "KNOWLEDGE_JWKS_PATH": str(keys_dir / "jwks.json"),
        "KNOWLEDGE_SERVICE_KEY_PATH": str(keys_dir / "dev-signing-key.pem"),
        "KNOWLEDGE_EMBEDDING_MODEL": default_embedding_model(),
        "KNOWLEDGE_BLOB_ROOT": str(tmp_path / "blobs"),
        "KNOWLEDGE_LOG_LEVEL": "warning",
    }


async def start_backends(pg, keys_dir, tmp) -> tuple[list[GrpcApp], dict[str, str]]:
    """Content-index and the embedder started (stop every app returned); their addresses by name."""
    apps: list[GrpcApp] = []
    addresses: dict[str, str] = {}
    for name, settings_type, build in (
        ("content-index", ContentIndexSettings, content_index_app),
        ("embedder", EmbedderSettings, embedder_app),
    ):
        env = {**base_env(pg, keys_dir, tmp, name), f"KNOWLEDGE_{registered(name).port_setting}": "0"}
        app = await build(settings_type.from_env(Env(env)))
        addresses[name] = f"127.0.0.1:{await app.start()}"
        apps.append(app)
    return apps, addresses


def ingest_env(migrated_pg, keys_dir, tmp, addresses, port: int) -> dict[str, str]:
    return {
        **base_env(migrated_pg, keys_dir, tmp, "ingest"),
        "KNOWLEDGE_INGEST_PORT": str(port),
        "KNOWLEDGE_CONTENT_INDEX_ADDRESS": addresses["content-index"],
        "KNOWLEDGE_EMBEDDER_ADDRESS": addresses["embedder"],
        "KNOWLEDGE_INGEST_LEASE_S": "2",
        "KNOWLEDGE_INGEST_EMBED_BATCH": "2",
        "KNOWLEDGE_CHUNK_MAX_CHARS": "300",
    }
