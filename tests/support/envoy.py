"""Starting a real Envoy in front of fake upstreams, for the gateway's unit tests."""

from __future__ import annotations

import asyncio
import subprocess
import time

import httpx


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
