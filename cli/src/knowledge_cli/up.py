"""``knowledge up``: the whole stack on 127.0.0.1 from one command.

Starts the stack (:mod:`knowledge_cli.stack`: embedded PostgreSQL unless
``KNOWLEDGE_DATABASE_URL`` is set → migrations → the services, each as its own process and
database role → Envoy) and prints one line with ``ready``, the REST base URL and the gRPC
addresses (the gateway's, then each public service's) and the MCP endpoint once every health check
is SERVING and the gateway answers.

With a GGUF model configured (``KNOWLEDGE_LOCAL_LLM_MODEL`` or ``knowledge up --llm PATH``) it
first starts a local OpenAI-compatible LLM server (llama.cpp, ``knowledge_cli.local_llm``) as the
child ``llm``, and points the services' ``KNOWLEDGE_LLM_URL`` / ``KNOWLEDGE_LLM_MODEL`` at it.

Then it supervises: a child that dies is started again after its backoff, and the stack gives
up (and stops, status 1) only when one child died more than ``KNOWLEDGE_SUPERVISOR_MAX_RESTARTS``
times within ``KNOWLEDGE_SUPERVISOR_WINDOW_S``. Every ``KNOWLEDGE_GC_EVERY_S`` seconds it runs a
blob garbage-collection pass against its content-index.

SIGTERM or Ctrl-C drains, then stops: the gateway first, then the services, then PostgreSQL.
"""

from __future__ import annotations

import asyncio
import signal
import sys

import grpc

from knowledge_cli.stack import Stack, StartupFailed, say
from knowledge_cli.stack_settings import StackSettings

SUPERVISE_EVERY_S = 0.5


async def collect_garbage_once(stack: Stack) -> None:
    """One applied GC pass against the stack's content-index, with the stack's own key; one line
    on stderr when it freed something (a failed pass is reported and retried at the next one)."""
    from knowledge_runtime.devkeys import mint_dev_token

    from knowledge_cli.gc import GC_CAPABILITIES, GC_TENANT, collect

    settings = stack.settings
    token = mint_dev_token(
        settings.data_dir / "keys",
        tenant=GC_TENANT,
        capabilities=GC_CAPABILITIES,
        issuer=settings.issuer,
        audience=settings.audience,
        ttl_s=900,
        service="gc",
    )
    address = f"{settings.host}:{settings.ports['content-index']}"
    try:
        report = await collect(address, token, apply=True)
    except grpc.aio.AioRpcError as error:
        say(f"garbage collection failed ({error.code().name}); next pass in {settings.gc_every_s:g}s")
        return
    if report.removed_count or report.orphan_removed_count:
        say(f"garbage collection: {report.line()}")


async def run_up(settings: StackSettings) -> int:
    stack = Stack(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        starting = asyncio.ensure_future(stack.start())
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():
            starting.cancel()
            return 0
        starting.result()
        logs = settings.data_dir / "logs"
        stack.write_status()
        grpc_at = ", ".join(f"{name} {address}" for name, address in settings.grpc_addresses.items())
        console = f"; console: {settings.console_url}" if settings.console_url else ""
        print(
            f"knowledge: ready {settings.rest_url} (gRPC: {grpc_at}; MCP: {settings.mcp_url}{console}; logs in {logs})",
            flush=True,
        )
        next_gc = loop.time() + settings.gc_every_s
        gc_pass: asyncio.Task | None = None
        while not stop.is_set():
            if settings.gc_every_s and loop.time() >= next_gc and (gc_pass is None or gc_pass.done()):
                gc_pass = asyncio.ensure_future(collect_garbage_once(stack))
                next_gc = loop.time() + settings.gc_every_s
            gave_up = await stack.supervise_once()
            if gave_up is not None:
                say(f"{gave_up}; stopping the stack")
                return 1
            try:
                async with asyncio.timeout(SUPERVISE_EVERY_S):
                    await stop.wait()
            except TimeoutError:
                pass
        if gc_pass is not None:
            gc_pass.cancel()
        print("knowledge: stopping", flush=True)
        return 0
    except StartupFailed as error:
        print(f"knowledge: failed to start: {error}", file=sys.stderr, flush=True)
        return 1
    finally:
        stack.stop()
