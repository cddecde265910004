"""Shared fixtures: development keys, tokens, and one embedded PostgreSQL for the session.

Plain helpers shared by test modules are in ``tests/support/``."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
import structlog
from knowledge_runtime.auth import TokenVerifier
from knowledge_runtime.devkeys import ensure_dev_keys, mint_dev_token
from knowledge_runtime.settings import DEFAULT_JWT_AUDIENCE, DEFAULT_JWT_ISSUER

from tests.support.db import TEST_DIMENSION

# The real local OpenAI-compatible LLM server (llama.cpp, SmolLM2-135M): the ``local_llm`` fixture.
pytest_plugins = ["tests.support.local_llm"]


@pytest.fixture(autouse=True)
def default_logging():
    """Each test starts from structlog's defaults: a service an earlier test built in-process
    configured logging for itself (often at ``warning``), which would hide the info lines a test
    captures. A test that needs the services' JSON lines configures them itself."""
    structlog.reset_defaults()


def _service_loops() -> set[asyncio.Task]:
    """The running background loops of in-process services (``Periodic``: job workers, the
    events listener and relay, webhook deliverers)."""
    return {
        task
        for task in asyncio.all_tasks()
        if not task.done() and getattr(task.get_coro(), "__qualname__", "") == "Periodic._run"
    }


@pytest.fixture(autouse=True)
async def no_service_outlives_its_test(request):
    """Every test shares the session's event loop and database: a service a test left running would
    go on claiming the jobs and webhooks of the tests after it, with its own settings (another blob
    store, another allow-list), and fail them far from the cause. Its loops are stopped here, and
    the test that left them is named in a warning."""
    before = _service_loops()
    yield
    leaked = _service_loops() - before
    if not leaked:
        return
    for task in leaked:
        task.cancel()
    await asyncio.gather(*leaked, return_exceptions=True)
    names = sorted(task.get_name() for task in leaked)
    warnings.warn(f"{request.node.nodeid} left in-process services running (stopped): {names}", stacklevel=1)


@pytest.fixture(scope="session")
def keys_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("keys")
    ensure_dev_keys(directory)
    return directory


@pytest.fixture(scope="session")
def verifier(keys_dir: Path) -> TokenVerifier:
    return TokenVerifier.from_file(keys_dir / "jwks.json", issuer=DEFAULT_JWT_ISSUER, audience=DEFAULT_JWT_AUDIENCE)


@pytest.fixture(scope="session")
def make_token(keys_dir: Path) -> Callable[..., str]:
    """A user's token: the public capabilities unless named (an internal one is refused)."""

    def make(tenant: str = "tenant-a", capabilities: list[str] | None = None, **kwargs) -> str:
        return mint_dev_token(keys_dir, tenant=tenant, capabilities=capabilities, **kwargs)

    return make


@pytest.fixture(scope="session")
def make_service_token(keys_dir: Path) -> Callable[..., str]:
    """A service token (subject ``service:tests``): every capability, internal ones too, unless named."""

    def make(tenant: str = "tenant-a", capabilities: list[str] | None = None, **kwargs) -> str:
        return mint_dev_token(keys_dir, tenant=tenant, capabilities=capabilities, service="tests", **kwargs)

    return make


@pytest.fixture(scope="session")
def embedded_pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    from knowledge_runtime.db.embedded import start_embedded

    server = start_embedded(tmp_path_factory.mktemp("pg"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
async def migrated_pg(embedded_pg) -> AsyncIterator:
    from knowledge_runtime.db.migrate import migrate

    await migrate(embedded_pg.url(), embedding_dimension=TEST_DIMENSION)
    yield embedded_pg


@pytest.fixture(scope="session")
def cross_encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small cross-encoder built from the packaged MiniLM weights (meaningless scores, real plumbing)."""
    from tests.support.crossencoder import build_cross_encoder

    return build_cross_encoder(tmp_path_factory.mktemp("cross-encoder") / "model")
