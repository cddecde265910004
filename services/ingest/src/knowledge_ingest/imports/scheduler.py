"""Scheduled passes over the import roots: every ``check_every_s`` each replica claims the
bindings whose pass is due (``KNOWLEDGE_IMPORT_SCAN_INTERVAL_S`` since the last one, claimed in
one statement, so two replicas never pass over the same binding at once) and runs them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import structlog
from knowledge_runtime.errors import Unavailable

from knowledge_ingest.imports.usecases import ImportUseCases

log = structlog.get_logger("knowledge.ingest.imports")


@dataclass
class ImportScheduler:
    imports: ImportUseCases
    interval_s: float  # 0: no scheduled passes
    check_every_s: float = 30.0
    _task: asyncio.Task | None = None
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self) -> None:
        if self.interval_s > 0 and self.imports.roots:
            self._task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        every = min(self.check_every_s, self.interval_s)
        while not self._stopping.is_set():
            try:
                await self.imports.scheduled_pass(self.interval_s)
            except Unavailable:
                log.warning("import_pass_database_unavailable")
            except Exception:
                log.exception("import_pass_failed")
            try:
                async with asyncio.timeout(every):
                    await self._stopping.wait()
            except TimeoutError:
                pass

    async def stop(self) -> None:
        self._stopping.set()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
