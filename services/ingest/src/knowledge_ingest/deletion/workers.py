"""The workers that remove what a deletion left (a batch of chunks per transaction, then the row)
and prune tombstones past their retention."""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from dataclasses import dataclass
from functools import partial

import structlog
from knowledge_runtime.periodic import Background, Periodic

from knowledge_ingest.domain.ports import TombstoneRepository
from knowledge_ingest.domain.tombstones import REMOVAL_BATCH, Removal, retry_delay_s

log = structlog.get_logger("knowledge.ingest.tombstones")


@dataclass
class Remover:
    """Runs claimed removal jobs to the end: the chunks a batch per transaction, then the row."""

    tombstones: TombstoneRepository
    lease_s: float
    batch: int = REMOVAL_BATCH

    async def run(self, removal: Removal) -> bool:
        """True when it completed; False when the lease was lost (another worker carries on)."""
        try:
            while True:
                deleted = await self.tombstones.remove_batch(removal, self.batch, self.lease_s)
                if deleted is None:
                    log.info("removal_lease_lost", document_id=removal.document_id)
                    return False
                if deleted < self.batch:  # the last batch: nothing is added to a deleted document
                    break
            if not await self.tombstones.finish(removal, self.lease_s):
                log.info("removal_lease_lost", document_id=removal.document_id)
                return False
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 - recorded on the job and retried until done
            delay = retry_delay_s(removal.attempts)
            log.warning("removal_retry_scheduled", document_id=removal.document_id, error_type=type(error).__name__)
            try:
                await self.tombstones.failed(removal, delay, type(error).__name__)
            except Exception:  # noqa: BLE001 - its lease expires and another claim retries it
                log.warning("removal_unrecorded", document_id=removal.document_id)
            return False
        log.info("document_removed", document_id=removal.document_id)
        return True


class RemovalWorkers:
    """Background removal: ``count`` loops claim removal jobs (any replica; SKIP LOCKED), and one
    pass every ``prune_every_s`` removes tombstones past the retention (idempotent)."""

    def __init__(
        self,
        tombstones: TombstoneRepository,
        *,
        count: int,
        lease_s: float,
        retention_s: float,
        poll_s: float = 0.5,
        prune_every_s: float = 300.0,
        batch: int = REMOVAL_BATCH,
    ) -> None:
        self._tombstones = tombstones
        self._remover = Remover(tombstones, lease_s, batch)
        self._lease_s = lease_s
        self._retention_s = retention_s
        base = f"{socket.gethostname()}:{os.getpid()}:removal"
        removing = [
            Periodic("removal_claim", partial(self.claim_and_remove, f"{base}:{i}:{uuid.uuid4().hex[:6]}"), poll_s)
            for i in range(count)
        ]
        self._running = Background([*removing, Periodic("tombstones_prune", self.prune, prune_every_s)])

    async def start(self) -> None:
        await self._running.start()

    async def stop(self) -> None:
        """A removal in flight is abandoned: its lease expires and a worker takes it over."""
        await self._running.stop()

    async def claim_and_remove(self, owner: str) -> bool:
        """One removal, if one is due: True when one ran (the loop looks for the next at once)."""
        removal = await self._tombstones.claim(owner, self._lease_s)
        if removal is None:
            return False
        structlog.contextvars.bind_contextvars(tenant=removal.tenant)
        try:
            await self._remover.run(removal)
        finally:
            structlog.contextvars.unbind_contextvars("tenant")
        return True

    async def prune(self) -> None:
        pruned = await self._tombstones.prune(self._retention_s)
        if pruned:
            log.info("tombstones_pruned", tombstones=pruned)
