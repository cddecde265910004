"""Scheduled passes over the import roots: every ``check_every_s`` each replica claims the
bindings whose pass is due (``KNOWLEDGE_IMPORT_SCAN_INTERVAL_S`` since the last one, claimed in
one statement, so two replicas never pass over the same binding at once) and runs them."""

from __future__ import annotations

from knowledge_runtime.periodic import Periodic

from knowledge_ingest.imports.usecases import ImportUseCases

CHECK_EVERY_S = 30.0


def scheduled_passes(
    imports: ImportUseCases, interval_s: float, check_every_s: float = CHECK_EVERY_S
) -> list[Periodic]:
    """The loop of scheduled passes; none when they are off (interval 0) or no root is configured."""
    if interval_s <= 0 or not imports.roots:
        return []

    async def due_passes() -> None:
        await imports.scheduled_pass(interval_s)

    return [Periodic("import_pass", due_passes, min(check_every_s, interval_s))]
