"""`knowledge up` as the e2e tests start it: free ports, its own data dir, stopped afterwards."""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

from tests.conftest import free_port

BIN = Path(sys.executable).parent
READY_TIMEOUT_S = 180


def read_until_ready(process: subprocess.Popen) -> str:
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + READY_TIMEOUT_S
    seen = []
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"knowledge up exited: {''.join(seen)}{process.stderr.read()}")
        if selector.select(timeout=0.5):
            line = process.stdout.readline()
            seen.append(line)
            if "ready" in line:
                return line
    raise AssertionError(f"knowledge up never said ready: {''.join(seen)}")


@contextmanager
def running_stack(data_dir: Path, **settings: str) -> Iterator[dict]:
    """The whole stack until the block ends; ``settings`` are extra KNOWLEDGE_* variables."""
    http_port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")}
    env.update({
        "KNOWLEDGE_DATA_DIR": str(data_dir),
        "KNOWLEDGE_HTTP_PORT": str(http_port),
        **{f"KNOWLEDGE_{s}_PORT": str(free_port()) for s in ("CONTENT_INDEX", "EMBEDDER", "INGEST", "SEARCH")},
        **{f"KNOWLEDGE_{name}": value for name, value in settings.items()},
    })
    process = subprocess.Popen([str(BIN / "knowledge"), "up"], env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = read_until_ready(process)
        yield {"process": process, "env": env, "line": line, "data_dir": data_dir, "port": http_port,
               "root": f"http://127.0.0.1:{http_port}", "base": f"http://127.0.0.1:{http_port}/api/v1/knowledge",
               "descendants": psutil.Process(process.pid).children(recursive=True)}
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
