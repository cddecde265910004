"""Starting a real Envoy in front of fake upstreams, for the gateway's unit tests: the rendered
configuration before a gRPC server that records what reaches it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import httpx
from google.protobuf import message_factory
from knowledge_gateway.config import GatewayConfig
from knowledge_gateway.descriptors import public_service_descriptors, write_descriptor_set
from knowledge_gateway.envoy import write_config
from knowledge_runtime.registry import public_services
from knowledge_runtime.server import SERVER_OPTIONS

from tests.support.net import free_port

ENVOY = Path(sys.executable).parent / "envoy"
SERVICES = public_service_descriptors()


async def wait_until_up(client: httpx.AsyncClient, envoy: subprocess.Popen, timeout_s: float = 60.0) -> None:
    """Until Envoy answers ``/livez`` (its upstreams are fakes, so readiness would not do)."""
    deadline = time.monotonic() + timeout_s
    while True:
        assert envoy.poll() is None, envoy.stderr.read().decode()
        try:
            if (await client.get("/livez")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "envoy did not start"
        await asyncio.sleep(0.1)


class Recorder:
    """Every public RPC: records (method, metadata, request messages), answers an empty message."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, str], list]] = []

    def handler(self, method):
        request = message_factory.GetMessageClass(method.input_type)
        response = message_factory.GetMessageClass(method.output_type)

        if method.client_streaming:

            async def streamed(iterator, context):
                self.calls.append((method.name, dict(context.invocation_metadata()), [m async for m in iterator]))
                return response()

            return grpc.stream_unary_rpc_method_handler(streamed, request.FromString, response.SerializeToString)

        async def unary(message, context):
            self.calls.append((method.name, dict(context.invocation_metadata()), [message]))
            return response()

        return grpc.unary_unary_rpc_method_handler(unary, request.FromString, response.SerializeToString)


@asynccontextmanager
async def running_gateway(tmp_path: Path, keys_dir: Path, **overrides) -> AsyncIterator[dict]:
    recorder = Recorder()
    server = grpc.aio.server(options=list(SERVER_OPTIONS))  # the services' limits
    for service in SERVICES:
        server.add_generic_rpc_handlers(
            [
                grpc.method_handlers_generic_handler(
                    service.full_name, {m.name: recorder.handler(m) for m in service.methods}
                )
            ]
        )
    upstream = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    port = free_port()
    config = GatewayConfig(
        listen_host="127.0.0.1",
        listen_port=port,
        admin_port=free_port(),
        upstreams={entry.name: f"127.0.0.1:{upstream}" for entry in public_services()},
        jwks_path=keys_dir / "jwks.json",
        issuer="knowledge-dev",
        audience="knowledge",
        descriptor_path=write_descriptor_set(tmp_path / "knowledge.pb"),
        **overrides,
    )
    path = write_config(config, tmp_path / "envoy.json")
    log_path = tmp_path / "access.log"
    with log_path.open("w") as log:
        envoy = subprocess.Popen(
            [str(ENVOY), "-c", str(path), "--log-level", "error", "--base-id", str(port)],
            stdout=log,
            stderr=subprocess.PIPE,
        )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            await wait_until_up(client, envoy)
            yield {"client": client, "recorder": recorder, "port": port, "log": log_path}
    finally:
        envoy.terminate()
        envoy.wait(30)
        await server.stop(None)
