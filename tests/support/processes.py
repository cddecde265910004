"""Services as their own processes in tests: the environment one starts with, and waiting for it."""

import os
import subprocess
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from knowledge_cli.stack_settings import default_embedding_model
from knowledge_runtime.registry import service


def service_env(name: str, port: int, pg, keys_dir, tmp_path, **extra: str) -> dict[str, str]:
    entry = service(name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")}
    env.update(
        {
            "KNOWLEDGE_DATA_DIR": str(tmp_path),
            f"KNOWLEDGE_{entry.port_setting}": str(port),
            "KNOWLEDGE_DATABASE_URL": pg.url(user=entry.database_role),
            "KNOWLEDGE_JWKS_PATH": str(keys_dir / "jwks.json"),
            "KNOWLEDGE_SERVICE_KEY_PATH": str(keys_dir / "dev-signing-key.pem"),
            "KNOWLEDGE_EMBEDDING_MODEL": default_embedding_model(),
        }
    )
    env.update(extra)
    return env


def module(name: str) -> str:
    return service(name).module


async def wait_serving(address: str, service: str, process: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    async with grpc.aio.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            assert process.poll() is None, process.stderr.read().decode()
            try:
                reply = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=1)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.aio.AioRpcError:
                pass
            time.sleep(0.1)
    raise AssertionError(f"{service} never reported SERVING")
