"""`knowledge up` never silently attaches to a PostgreSQL it did not start: one that another live
process holds is refused, naming that process; one nobody holds is adopted, saying so, and is
stopped with the stack."""

import subprocess
import sys

import pytest
from knowledge_cli.stack import Stack, StartupFailed
from knowledge_cli.stack_settings import RestartPolicy, StackSettings
from knowledge_runtime.db.embedded import running_postmaster

pytestmark = pytest.mark.integration

HOLDER = """
import sys, time
from pathlib import Path
from knowledge_runtime.db.embedded import start_embedded
start_embedded(Path(sys.argv[1]))
print("holding", flush=True)
time.sleep(600)
"""


def settings(data_dir) -> StackSettings:
    return StackSettings(
        data_dir=data_dir,
        host="127.0.0.1",
        http_port=1,
        admin_port=0,
        ports={},
        database_url=None,
        embedding_model="unused",
        embedding_model_id="",
        issuer="i",
        audience="a",
        max_upload_bytes=1,
        restart_policy=RestartPolicy(),
    )


def test_a_database_held_by_another_process_is_refused_and_an_orphan_adopted(tmp_path, capsys):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        pid = running_postmaster(tmp_path / "postgres")
        assert pid is not None
        with pytest.raises(StartupFailed) as refused:
            Stack(settings(tmp_path))._database()
        assert f"is in use by process {holder.pid}" in str(refused.value)
        holder.kill()  # its holder gone, the server runs on: an orphan
        holder.wait(10)
        assert running_postmaster(tmp_path / "postgres") == pid
        stack = Stack(settings(tmp_path))
        stack._database()
        assert (
            f"adopting the PostgreSQL already running in {tmp_path / 'postgres'} (pid {pid})" in capsys.readouterr().err
        )
        assert stack.database.pid == pid
        stack.stop()
        assert running_postmaster(tmp_path / "postgres") is None  # stopped with the stack
    finally:
        if holder.poll() is None:
            holder.kill()
        if (pid := running_postmaster(tmp_path / "postgres")) is not None:
            import psutil

            psutil.Process(pid).kill()
