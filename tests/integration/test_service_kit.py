"""The runtime's service kit with real parts: bootstraps that close what they opened when a
later step fails (real pool, real channels), and every service's metrics port."""

from __future__ import annotations

import socket
import urllib.request

import grpc
import pytest
from knowledge_runtime.devkeys import PRIVATE_KEY_FILE
from knowledge_runtime.settings import Env, SettingsError

from tests.support.net import free_port

pytestmark = pytest.mark.integration


# --- bootstraps -------------------------------------------------------------------------------


def service_env(pg, keys_dir, tmp_path, service: str, metrics_port: int) -> Env:
    key = service.upper().replace("-", "_")
    return Env({
        "KNOWLEDGE_DATA_DIR": str(tmp_path),
        "KNOWLEDGE_DATABASE_URL": pg.url(user="knowledge_" + key.lower()),
        "KNOWLEDGE_JWKS_PATH": str(keys_dir / "jwks.json"),
        "KNOWLEDGE_SERVICE_KEY_PATH": str(keys_dir / PRIVATE_KEY_FILE),
        "KNOWLEDGE_BLOB_ROOT": str(tmp_path / "blobs"),
        "KNOWLEDGE_LOG_LEVEL": "warning",
        f"KNOWLEDGE_{key}_PORT": "0",
        "KNOWLEDGE_INGEST_WORKERS": "1",
        "KNOWLEDGE_METRICS_PORT": str(metrics_port),
        "KNOWLEDGE_CONTENT_INDEX_ADDRESS": f"127.0.0.1:{free_port()}",
        "KNOWLEDGE_EMBEDDER_ADDRESS": f"127.0.0.1:{free_port()}",
    })


def build(service: str, env: Env):
    if service == "content-index":
        from knowledge_content_index.bootstrap import build_app
        from knowledge_content_index.config import ContentIndexSettings

        return build_app(ContentIndexSettings.from_env(env))
    if service == "ingest":
        from knowledge_ingest.bootstrap import build_app
        from knowledge_ingest.config import IngestSettings

        return build_app(IngestSettings.from_env(env))
    from knowledge_search.bootstrap import build_app
    from knowledge_search.config import SearchSettings

    return build_app(SearchSettings.from_env(env))


@pytest.fixture
def opened(monkeypatch):
    """Every pool and channel a bootstrap opens, through the real functions."""
    import knowledge_content_index.bootstrap
    import knowledge_ingest.adapters.services
    import knowledge_ingest.bootstrap
    import knowledge_search.adapters.embedder
    import knowledge_search.bootstrap
    from knowledge_runtime import clients
    from knowledge_runtime.db.connect import connect_service_database

    seen: dict[str, list] = {"pools": [], "channels": []}

    async def connect(*args, **kwargs):
        db = await connect_service_database(*args, **kwargs)
        seen["pools"].append(db.pool)
        return db

    def channel(*args, **kwargs):
        opened_channel = clients.channel(*args, **kwargs)
        seen["channels"].append(opened_channel)
        return opened_channel

    for module in (knowledge_content_index.bootstrap, knowledge_ingest.bootstrap, knowledge_search.bootstrap):
        monkeypatch.setattr(module, "connect_service_database", connect)
    for module in (knowledge_ingest.adapters.services, knowledge_search.adapters.embedder):
        monkeypatch.setattr(module, "channel", channel)
    return seen


CHANNELS = {"content-index": 0, "ingest": 2, "search": 1}


@pytest.mark.parametrize("service", ["content-index", "ingest", "search"])
async def test_a_bootstrap_that_fails_late_closes_what_it_opened(service, opened, migrated_pg, keys_dir, tmp_path):
    with socket.socket() as taken:  # the metrics port, one of the last steps, is in use
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        env = service_env(migrated_pg, keys_dir, tmp_path, service, taken.getsockname()[1])
        with pytest.raises(SettingsError, match="KNOWLEDGE_METRICS_PORT"):
            await build(service, env)
    assert len(opened["pools"]) == 1 and len(opened["channels"]) == CHANNELS[service]
    assert opened["pools"][0].is_closing()
    assert all(c.get_state() == grpc.ChannelConnectivity.SHUTDOWN for c in opened["channels"])


@pytest.mark.parametrize("service", ["content-index", "ingest", "search"])
async def test_every_service_serves_metrics_and_closes_everything_when_it_stops(service, opened, migrated_pg,
                                                                                keys_dir, tmp_path):
    metrics_port = free_port()
    app = await build(service, service_env(migrated_pg, keys_dir, tmp_path, service, metrics_port))
    await app.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as reply:
            assert reply.status == 200 and b"# TYPE" in reply.read()
        assert not opened["pools"][0].is_closing()
    finally:
        await app.stop()
    assert opened["pools"][0].is_closing()
    assert all(c.get_state() == grpc.ChannelConnectivity.SHUTDOWN for c in opened["channels"])
    with socket.socket() as again:  # the metrics server let go of its port (TIME_WAIT aside)
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", metrics_port))
        again.listen()
