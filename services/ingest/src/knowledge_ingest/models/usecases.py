"""The model change's use cases: start, status, the gate and the swap, rollback, cancel; and the
background steps that re-embed every chunk, run the stored evaluation sets and gate the change
once its new vectors are complete, and drop the old vectors after the grace period.

Every transition runs in one transaction that locks the ``embedding_stores`` row: the swap flips
what search reads in that transaction, so a search reads either model, never a mix.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace

import asyncpg
from knowledge_runtime.auth import Scope
from knowledge_runtime.db.pool import Transaction
from knowledge_runtime.logging import get_logger

from knowledge_ingest.domain.errors import (
    InvalidRequest,
    ModelChangeNotFound,
    ModelChangeOpen,
    ModelChangeState,
    ModelNotLoaded,
)
from knowledge_ingest.domain.model_change import (
    CHUNKS_STORE,
    DEFAULT_NDCG_MARGIN,
    GATED_MODE,
    NEXT_STORE,
    ChangeState,
    Figures,
    ModelChange,
    Progress,
    Stores,
    gate,
    may_drop_old,
    may_follow,
    progress,
    start_target,
)
from knowledge_ingest.domain.ports import HeldModels
from knowledge_ingest.models.evaluation import Evaluator
from knowledge_ingest.models.postgres import PostgresModelChanges, figures_json

log = get_logger("knowledge.ingest")

DEFAULT_BATCH = 64  # chunks re-embedded per step: one EmbedTexts per tenant in the batch
DROP_BATCH = 1000  # old chunks.embedding values cleared per step after a change off that store
GATED_FROM = (ChangeState.EVALUATING, ChangeState.HELD)  # the states the gate decides in


@dataclass(frozen=True, slots=True)
class ChangeView:
    change: ModelChange
    progress: Progress
    reading_model: str


class ModelChangeUseCases:
    def __init__(
        self,
        store: PostgresModelChanges,
        embedder: HeldModels,
        *,
        grace_s: float,
        evaluator: Evaluator | None = None,
        margin: float = DEFAULT_NDCG_MARGIN,
        batch: int = DEFAULT_BATCH,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._embedder = embedder
        self._grace_s = grace_s
        self._evaluator = evaluator
        self._margin = margin
        self._batch = batch
        self._clock = clock

    # -- the operator's calls

    async def start(self, scope: Scope, to_model: str) -> ChangeView:
        to_model = to_model.strip()
        if not to_model:
            raise InvalidRequest("to_model is required", field="to_model")
        held = await self._embedder.held(scope.tenant)
        dimensions = dict(held)
        if to_model not in dimensions:
            raise ModelNotLoaded(
                to_model,
                f"the embedder does not hold {to_model[:120]!r} (it holds {', '.join(dimensions)}); "
                "configure it as KNOWLEDGE_EMBEDDING_NEXT_MODEL and restart the embedder",
            )
        current_model = held[0][0]
        dimension = dimensions[to_model]
        chunks_dimension = await self._store.chunks_dimension()
        try:
            async with self._store.transaction() as tx:
                stores = await self._store.locked_stores(tx)
                opened = await self._store.open_change(tx)
                if opened is not None:
                    raise ModelChangeOpen(opened[0].change_id)
                target = start_target(stores, to_model, current_model)
                if target is None:
                    raise InvalidRequest(f"search reads {to_model[:120]!r} already", field="to_model")
                if target == CHUNKS_STORE and dimension != chunks_dimension:
                    raise ModelNotLoaded(
                        to_model,
                        f"{to_model[:120]!r} has {dimension} dimensions; a change back into the chunks' own "
                        f"column needs {chunks_dimension}",
                    )
                from_model = stores.model_of(stores.current) or current_model
                named = replace(
                    stores,
                    chunks_model=from_model if stores.current == CHUNKS_STORE else to_model,
                    next_model=from_model if stores.current == NEXT_STORE else to_model,
                )
                if target == NEXT_STORE:
                    await self._store.prepare_next(tx, dimension)
                await self._store.set_stores(tx, named, dimension if target == NEXT_STORE else None)
                change = await self._store.insert(
                    tx, from_model, stores.current, to_model, target, dimension, scope.subject or "", scope.tenant
                )
        except asyncpg.UniqueViolationError:  # another start won the race
            opened = await self._store.open_change()
            raise ModelChangeOpen(opened[0].change_id if opened else 0) from None
        log.info("model_change_started", change_id=change.change_id, to_model=to_model, store=target)
        return await self._view(change)

    async def get(self) -> ChangeView:
        opened = await self._store.open_change()
        change = opened[0] if opened else await self._store.latest()
        if change is None:
            raise ModelChangeNotFound()
        return await self._view(change)

    async def swap(
        self, current: Figures | None, candidate: Figures | None, *, force: bool, margin: float = 0.0
    ) -> ChangeView:
        if not 0.0 <= margin <= 1.0:
            raise InvalidRequest("margin must be in 0..1", field="margin")
        for name, given in (("current", current), ("candidate", candidate)):
            if given is not None and GATED_MODE not in given.modes:
                raise InvalidRequest(
                    f"{name} needs the {GATED_MODE} mode's figures, the ones the gate reads", field=name
                )
        if (current is None) != (candidate is None):
            raise InvalidRequest("give both models' figures, or neither (then only force swaps)", field="candidate")
        change = await self._open()
        if change.state not in (ChangeState.EVALUATING, ChangeState.HELD):
            raise ModelChangeState(
                change.change_id,
                change.state.value,
                f"the change is {change.state.value}: it swaps once every chunk has the new model's vectors",
            )
        done, total = await self._store.counts(change.to_store)
        if done < total:
            raise ModelChangeState(
                change.change_id, change.state.value, f"{total - done} chunks still lack the new model's vectors"
            )
        return await self._view(
            await self._gate(change, current, candidate, force=force, margin=margin or self._margin)
        )

    async def _gate(
        self, change: ModelChange, current: Figures | None, candidate: Figures | None, *, force: bool, margin: float
    ) -> ModelChange:
        """The gate's decision written: swapped (search reads the new store from this transaction
        on) or held, with both figures; a change that moved on meanwhile is left as it is."""
        decision = gate(current, candidate, margin=margin, force=force)
        figures = figures_json(current, candidate)
        async with self._store.transaction() as tx:
            stores = await self._store.locked_stores(tx)
            opened = await self._store.open_change(tx)
            if opened is None or opened[0].change_id != change.change_id or opened[0].state not in GATED_FROM:
                now = opened[0].state.value if opened else "closed"
                raise ModelChangeState(change.change_id, now, f"the change is {now} now: the gate did not run")
            if decision.swap:
                await self._store.set_stores(tx, replace(stores, current=change.to_store))
                state = ChangeState.SWAPPED
            else:
                state = ChangeState.HELD
            change = await self._store.set_state(
                tx, change.change_id, state, forced=decision.forced, why=decision.why, figures=figures
            )
        log.info("model_change_gated", change_id=change.change_id, swapped=decision.swap, forced=decision.forced)
        return change

    async def rollback(self) -> ChangeView:
        change = await self._open()
        if change.state is not ChangeState.SWAPPED:
            raise ModelChangeState(change.change_id, change.state.value, "only a swapped change rolls back")
        return await self._close(change, ChangeState.ROLLED_BACK)

    async def cancel(self) -> ChangeView:
        change = await self._open()
        if not may_follow(change.state, ChangeState.CANCELLED):
            raise ModelChangeState(
                change.change_id, change.state.value, "a swapped change is rolled back, not cancelled"
            )
        return await self._close(change, ChangeState.CANCELLED)

    # -- the background steps

    async def reembed(self) -> bool:
        """One batch of the open change's chunks that lack the new model's vectors, embedded and
        written with the change's progress in one transaction. True: more to do at once."""
        opened = await self._store.open_change()
        if opened is None:
            return False
        change, cursor = opened
        missing = await self._store.missing(change.to_store, cursor, self._batch)
        if not missing:
            if cursor > 0:  # one more pass from the start: chunks a race left without the vector
                missing = await self._store.missing(change.to_store, 0, self._batch)
            if not missing:
                return await self._complete(change)
        by_tenant: dict[str, list[int]] = defaultdict(list)
        for index, chunk in enumerate(missing):
            by_tenant[chunk.tenant].append(index)
        vectors: list[list[float]] = [[] for _ in missing]
        for tenant, indexes in by_tenant.items():  # each tenant's cost recorded as its own
            embedded = await self._embedder.embed_with(tenant, [missing[i].content for i in indexes], change.to_model)
            for i, vector in zip(indexes, embedded, strict=True):
                vectors[i] = vector
        written = await self._store.write(
            change.change_id,
            change.to_store,
            [c.chunk_id for c in missing],
            vectors,
            cursor=max(c.chunk_id for c in missing),
        )
        return written is not None

    async def tend(self) -> bool:
        """The old vectors dropped once the grace period after a swap ends (no rollback after
        that); a dropped chunks store emptied a batch at a time."""
        opened = await self._store.open_change()
        if opened is not None and opened[0].swap_time is not None:
            change = opened[0]
            if may_drop_old(change.state, change.swap_time or 0.0, self._clock(), self._grace_s):
                async with self._store.transaction() as tx:
                    stores = await self._store.locked_stores(tx)
                    await self._drop(tx, stores, change.from_store)
                    await self._store.set_state(tx, change.change_id, ChangeState.FINISHED)
                log.info("model_change_finished", change_id=change.change_id)
        return await self._store.drop_chunks_batch(DROP_BATCH) == DROP_BATCH

    # -- helpers

    async def _complete(self, change: ModelChange) -> bool:
        """Every chunk has the new vector: a re-embedding change is evaluating, and the stored
        evaluation sets gate it; with none stored it waits for the operator's swap."""
        if change.state is ChangeState.RE_EMBEDDING:
            async with self._store.transaction() as tx:
                await self._store.locked_stores(tx)
                change = await self._store.set_state(tx, change.change_id, ChangeState.EVALUATING)
            log.info("model_change_re_embedded", change_id=change.change_id)
        if change.state is ChangeState.EVALUATING and self._evaluator is not None:
            async with self._store.evaluation_claim(change.change_id) as claimed:
                if not claimed:  # another replica runs the sets: running them twice would only load search
                    return False
                measured = await self._evaluator.run()
                if measured is not None:
                    try:
                        await self._gate(change, *measured, force=False, margin=self._margin)
                    except ModelChangeState:  # the operator swapped, held or cancelled it meanwhile
                        pass
        return False

    async def _open(self) -> ModelChange:
        opened = await self._store.open_change()
        if opened is None:
            raise ModelChangeNotFound("there is no open model change")
        return opened[0]

    async def _close(self, change: ModelChange, state: ChangeState) -> ChangeView:
        """Search reads the change's old store again; the new store is emptied and not written."""
        async with self._store.transaction() as tx:
            stores = await self._store.locked_stores(tx)
            await self._store.set_stores(tx, replace(stores, current=change.from_store))
            await self._drop(tx, replace(stores, current=change.from_store), change.to_store)
            change = await self._store.set_state(tx, change.change_id, state)
        log.info("model_change_closed", change_id=change.change_id, state=state.value)
        return await self._view(change)

    async def _drop(self, tx: Transaction, stores: Stores, store: str) -> None:
        """The store is no longer written; its vectors go (the chunks column's a batch at a time,
        by ``tend``)."""
        if store == CHUNKS_STORE:
            await self._store.set_stores(tx, replace(stores, chunks_model=None))
        else:
            await self._store.set_stores(tx, replace(stores, next_model=None))
            await self._store.drop_next(tx)

    async def _view(self, change: ModelChange) -> ChangeView:
        stores = await self._store.stores()
        if change.open:
            done, total = await self._store.counts(change.to_store)
        else:
            done = total = change.chunks_done
        elapsed = (change.end_time or self._clock()) - change.create_time
        shown = progress(min(done, total), total, elapsed)
        rate = change.chunks_done / elapsed if elapsed > 0 else 0.0
        eta = (total - min(done, total)) / rate if rate > 0 else shown.eta_s
        reading = stores.model_of(stores.current) or change.from_model
        return ChangeView(change=change, progress=replace(shown, per_s=rate, eta_s=eta), reading_model=reading)
