"""`knowledge up` as the e2e tests start it: free ports, its own data dir, stopped afterwards; and a
raw HTTP/1.1 client for bodies the gateway answers before it has read them."""

from __future__ import annotations

import os
import select
import selectors
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
from knowledge_runtime import registry

from tests.support.net import free_port

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
    env.update(
        {
            "KNOWLEDGE_DATA_DIR": str(data_dir),
            "KNOWLEDGE_HTTP_PORT": str(http_port),
            **{f"KNOWLEDGE_{entry.port_setting}": str(free_port()) for entry in registry.SERVICES},
            **{f"KNOWLEDGE_{name}": value for name, value in settings.items()},
        }
    )
    process = subprocess.Popen(
        [str(BIN / "knowledge"), "up"], env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        line = read_until_ready(process)
        yield {
            "process": process,
            "env": env,
            "line": line,
            "data_dir": data_dir,
            "port": http_port,
            "root": f"http://127.0.0.1:{http_port}",
            "base": f"http://127.0.0.1:{http_port}/api/v1/knowledge",
            "mcp": f"http://127.0.0.1:{http_port}/mcp",
            "descendants": psutil.Process(process.pid).children(recursive=True),
        }
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()


@dataclass
class EarlyAnswer:
    status: int
    headers: dict[str, str]
    body: bytes
    sent: int  # body bytes the socket took before the answer came (or the connection closed)


TERMINAL_STATES = frozenset({"DOCUMENT_STATE_SEARCHABLE", "DOCUMENT_STATE_FAILED", "DOCUMENT_STATE_CANCELLED"})


def wait_for_job(base: str, headers: dict, job_id: str, timeout_s: float = 180) -> tuple[dict, list[dict]]:
    """Polls GET /ingest/{job_id} through the gateway until the job ends: its last state and every poll."""
    seen = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        reply = httpx.get(f"{base}/ingest/{job_id}", headers=headers)
        assert reply.status_code == 200, reply.text
        seen.append(reply.json())
        if seen[-1]["state"] in TERMINAL_STATES:
            return seen[-1], seen
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} did not finish: {seen[-1] if seen else None}")


def zeros(total: int, piece: int = 256 * 1024) -> Iterator[bytes]:
    """``total`` zero bytes in pieces, never whole in memory."""
    data = b"\0" * piece
    for start in range(0, total, piece):
        yield data[: min(piece, total - start)]


def post_body(
    port: int, path: str, headers: dict[str, str], body: Iterable[bytes], *, chunked: bool = False
) -> EarlyAnswer:
    """POSTs the body's pieces (each framed as a chunk when ``chunked``), watching for the answer
    between writes as curl does: a client that only reads once it has sent everything may find
    the connection closed under an early answer. The socket's own buffers still take some bytes
    after the gateway stops reading."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(30)
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    sock.sendall((head + ("Transfer-Encoding: chunked\r\n" if chunked else "") + "\r\n").encode())
    sent = 0
    try:
        for piece in body:
            if select.select([sock], [], [], 0)[0]:
                break  # the answer (or the close) came before the body ended
            sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            sent += len(piece)
        else:
            if chunked:
                sock.sendall(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError, TimeoutError):
        pass  # the gateway answered and closed: it stopped reading
    try:
        reply = b""
        while b"\r\n\r\n" not in reply:
            more = sock.recv(65536)
            if not more:
                break
            reply += more
        head_text, _, body = reply.partition(b"\r\n\r\n")
        lines = head_text.decode("latin-1").split("\r\n")
        answer_headers = dict(line.lower().split(": ", 1) for line in lines[1:] if ": " in line)
        length = int(answer_headers.get("content-length", len(body)))
        while len(body) < length:
            more = sock.recv(65536)
            if not more:
                break
            body += more
    finally:
        sock.close()
    return EarlyAnswer(int(lines[0].split(" ", 2)[1]), answer_headers, body[:length], sent)
