"""Shared fixtures: development keys, tokens, and one embedded PostgreSQL for the session."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2
from knowledge_runtime.auth import TokenVerifier
from knowledge_runtime.devkeys import ensure_dev_keys, mint_dev_token

TEST_DIMENSION = 384  # all-MiniLM-L6-v2, the model the tests and the embedded stack use


@pytest.fixture(scope="session")
def keys_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("keys")
    ensure_dev_keys(directory)
    return directory


@pytest.fixture(scope="session")
def verifier(keys_dir: Path) -> TokenVerifier:
    return TokenVerifier.from_file(keys_dir / "jwks.json", issuer="knowledge-dev", audience="knowledge")


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


def auth(token: str) -> list[tuple[str, str]]:
    """gRPC call metadata carrying ``token`` as the bearer."""
    return [("authorization", f"Bearer {token}")]


def error_info(error: grpc.aio.AioRpcError) -> error_details_pb2.ErrorInfo:
    """The one ErrorInfo of a failed call's google.rpc.Status (the house style allows no other)."""
    raw = dict(error.trailing_metadata() or ()).get("grpc-status-details-bin")
    status = status_pb2.Status.FromString(raw)
    assert len(status.details) == 1
    info = error_details_pb2.ErrorInfo()
    status.details[0].Unpack(info)
    return info


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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
