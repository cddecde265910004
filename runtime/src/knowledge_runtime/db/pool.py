"""The asyncpg pool with pgvector's codec, and a span per database call.

SQL lives in the adapters as named module constants; every call names its statement, so
spans read ``db.<name>`` and no SQL text or parameter ends up in a span or a log.
Connection failures become :class:`Unavailable`, which callers may retry.

A connection goes back to the pool without asyncpg's reset query (``pg_advisory_unlock_all();
CLOSE ALL; UNLISTEN *; RESET ALL``): that was a round trip on every release, a third of ingest's
statements in a bulk run. asyncpg still rolls back an open transaction and drops the listener
callbacks on release. So nothing here leaves session state on a pooled connection: settings are
``SET LOCAL`` / ``set_config(..., true)``, advisory locks ``pg_advisory_xact_lock``, and a holder
of a LISTEN connection (the outbox, the document feed) removes its listeners before releasing it.

A PostgreSQL error's DETAIL (``Key (tenant_id, name)=(acme, Handbook) already exists``) and
CONTEXT quote row values, so they are dropped from every error passing through here: its type,
SQLSTATE, message and constraint name still say what happened, and a traceback in the logs
carries no tenant's data.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
from opentelemetry import trace
from pgvector.asyncpg import register_vector

from knowledge_runtime.errors import Unavailable

_tracer = trace.get_tracer("knowledge.db")
# The server is gone, going (a fast or crash shutdown ends every session) or not yet accepting.
_UNAVAILABLE = (
    OSError,
    asyncpg.CannotConnectNowError,
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.TooManyConnectionsError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.ConnectionFailureError,
    asyncpg.ClientCannotConnectError,
)


async def _init_connection(connection: asyncpg.Connection) -> None:
    await register_vector(connection)


async def _keep_session(_connection: asyncpg.Connection) -> None:
    """The pool's reset: none beyond asyncpg's own (rollback, listener callbacks); see above."""


class _Queries:
    """fetch / fetchrow / fetchval / execute with a span each; ``_conn`` is a pool or a connection."""

    _conn: Any

    async def _call(self, method: str, name: str, sql: str, *args: Any) -> Any:
        with _tracer.start_as_current_span(f"db.{name}", kind=trace.SpanKind.CLIENT) as span:
            span.set_attribute("db.system", "postgresql")
            span.set_attribute("db.operation.name", name)
            try:
                return await getattr(self._conn, method)(sql, *args)
            except _UNAVAILABLE as error:
                raise Unavailable("the database is unavailable") from error
            except asyncpg.PostgresError as error:
                _drop_row_values(error)
                raise

    async def fetch(self, name: str, sql: str, *args: Any) -> list[asyncpg.Record]:
        return await self._call("fetch", name, sql, *args)

    async def fetchrow(self, name: str, sql: str, *args: Any) -> asyncpg.Record | None:
        return await self._call("fetchrow", name, sql, *args)

    async def fetchval(self, name: str, sql: str, *args: Any) -> Any:
        return await self._call("fetchval", name, sql, *args)

    async def execute(self, name: str, sql: str, *args: Any) -> str:
        return await self._call("execute", name, sql, *args)

    async def executemany(self, name: str, sql: str, rows: list[tuple]) -> None:
        await self._call("executemany", name, sql, rows)


def _drop_row_values(error: asyncpg.PostgresError) -> None:
    """Keep the error (callers catch it by type) but not the parts that quote row values."""
    for attribute in ("detail", "context", "internal_query"):
        setattr(error, attribute, None)


class Transaction(_Queries):
    def __init__(self, connection: asyncpg.Connection | asyncpg.pool.PoolConnectionProxy) -> None:
        self._conn = connection


class Database(_Queries):
    """A pool for one service role; ``transaction()`` yields a :class:`Transaction`."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._conn = pool
        self.pool = pool

    @classmethod
    async def connect(
        cls, dsn: str, *, min_size: int = 1, max_size: int = 10, server_settings: Mapping[str, str] | None = None
    ) -> Database:
        """``server_settings``: session defaults of every connection (sent when it connects), for
        settings a service wants on every query."""
        try:
            pool = await asyncpg.create_pool(
                dsn,
                min_size=min_size,
                max_size=max_size,
                init=_init_connection,
                reset=_keep_session,
                server_settings=dict(server_settings) if server_settings else None,
            )
        except _UNAVAILABLE as error:
            raise Unavailable("the database is unavailable") from error
        return cls(pool)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Transaction]:
        try:
            async with self.pool.acquire() as connection, connection.transaction():
                yield Transaction(connection)
        except _UNAVAILABLE as error:
            raise Unavailable("the database is unavailable") from error
        except asyncpg.PostgresError as error:  # e.g. a deferred constraint failing at commit
            _drop_row_values(error)
            raise

    async def close(self) -> None:
        await self.pool.close()
