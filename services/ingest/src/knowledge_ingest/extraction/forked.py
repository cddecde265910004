"""A helper process forked from the extraction child, to read part of a file on another core.

The extraction child (``isolated.py``) runs one file on one core. A long PDF's pages are read
one after another, and while they are, the rest of the service (the embedder waiting for the
first chunks) is idle. A :class:`Helper` forks the child (single-threaded, with the file's reader
already parsed) and runs ``work`` there; its result comes back pickled through a pipe. A helper
that fails, dies or is too slow yields None, and the caller does that work itself: the file's
outcome never depends on the helper. The helper is bound by the child's address-space limit (a
fork inherits it), killed when its result is not wanted, and dies with the child; it keeps no
descriptor of the child's but its own pipe.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from knowledge_runtime.process import die_with_parent

T = TypeVar("T")
_READ_BYTES = 1 << 20


class Helper(Generic[T]):
    """``work()`` running in a forked process from construction on; ``result`` collects it."""

    def __init__(self, work: Callable[[], T]) -> None:
        self._fd, write = os.pipe()
        self._pid: int | None = os.fork()
        if self._pid == 0:  # the helper: never returns to the caller's frames
            try:
                _only(write)
                die_with_parent(signal.SIGKILL)
                if os.getppid() == 1:  # the child died before the line above took effect
                    return
                _serve(work, write)
            finally:
                os._exit(0)
        os.close(write)

    def result(self, timeout_s: float) -> T | None:
        """The helper's result; None when it raised, died or sent nothing whole within ``timeout_s``."""
        received = bytearray()
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self._fd], [], [], left)[0]:
                    return None
                part = os.read(self._fd, _READ_BYTES)
                if not part:
                    break
                received += part
            kind, value = pickle.loads(received) if received else ("died", None)
        except (OSError, EOFError, ValueError, pickle.UnpicklingError):
            return None
        finally:
            self.close()
        return value if kind == "ok" else None

    def close(self) -> None:
        """Stops the helper (if it still runs) and reaps it. Idempotent."""
        if self._pid is None:
            return
        pid, self._pid = self._pid, None
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
        os.close(self._fd)


def _only(fd: int) -> None:
    """Closes every inherited descriptor but ``fd``: above all the child's pipe to ingest, which
    must read as closed once the child dies (a helper holding it would hide the death). ``work``
    opens what it reads anew."""
    os.closerange(3, fd)
    os.closerange(fd + 1, os.sysconf("SC_OPEN_MAX"))


def _serve(work: Callable[[], object], fd: int) -> None:
    try:
        payload = pickle.dumps(("ok", work()), protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException as error:  # noqa: BLE001 - reported by type only; the caller does the work itself
        payload = pickle.dumps(("error", type(error).__name__))
    view = memoryview(payload)
    while view:
        view = view[os.write(fd, view) :]
    os.close(fd)
