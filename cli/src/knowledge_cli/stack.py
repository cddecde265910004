"""The processes of ``knowledge up``: started in order, supervised, drained and stopped.

Embedded PostgreSQL (unless ``KNOWLEDGE_DATABASE_URL`` is set) → migrations → the optional local
LLM server → the services of the registry, each as its own process and database role (the MCP
adapter, last, has none) → Envoy, each waited for (SERVING, or answering) before the next.

A child that dies (a service, the LLM server, Envoy, or the embedded PostgreSQL) is started
again after a backoff that doubles with each recent death (:class:`RestartPolicy`), with one
line on stderr when it dies and one when it is back, and ``<data dir>/run/status.json`` says
what each child is doing; one that died more than ``max_restarts`` times within the window is a
reason to stop the stack.

Stopping drains: Envoy stops accepting and finishes the requests in flight (bounded by
``KNOWLEDGE_SHUTDOWN_GRACE_S``), then each service drains its own calls, then the embedded
PostgreSQL stops — whichever postmaster runs on its data directory by then. A start finds a
PostgreSQL already running there: it adopts it, saying so, or refuses if another live process
holds it.
"""

from __future__ import annotations

import asyncio
import json
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
from knowledge_gateway.config import GatewayConfig
from knowledge_gateway.console import SOURCE_DIR as CONSOLE_SOURCE_DIR
from knowledge_gateway.descriptors import write_descriptor_set
from knowledge_gateway.envoy import write_config
from knowledge_gateway.routes import gateway_upstreams
from knowledge_runtime.db.embedded import EmbeddedPostgres, other_holders, running_postmaster
from knowledge_runtime.db.migrate import migrate
from knowledge_runtime.devkeys import KEY_ID_FILE, PRIVATE_KEY_FILE, ensure_dev_keys
from knowledge_runtime.process import die_with_parent
from knowledge_runtime.registry import HTTP_READINESS_PATH, SERVICE_NAMES, service, with_database

from knowledge_cli.dev_sign_in import DevSignIn
from knowledge_cli.local_llm import LocalLlmError, base_url, check_model, model_alias, models_url, server_argv
from knowledge_cli.stack_settings import StackSettings

START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 15.0
DATABASE = "postgres"  # the embedded PostgreSQL's name in messages and status.json


def say(message: str) -> None:
    """One line on stderr: what the supervisor saw or did (never a traceback)."""
    print(f"knowledge: {message}", file=sys.stderr, flush=True)


@dataclass
class Child:
    name: str
    process: subprocess.Popen
    log_path: Path
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    deaths: list[float] = field(default_factory=list)  # monotonic times it was found dead
    restarts: int = 0
    restart_at: float | None = None  # set while it waits for its restart
    last_status: int | None = None

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class StartupFailed(RuntimeError):
    pass


@dataclass
class WatchedDatabase:
    """The embedded PostgreSQL as the supervisor sees it (pg_ctl daemonises it: not a Popen child)."""

    pid: int | None = None
    deaths: list[float] = field(default_factory=list)
    restarts: int = 0
    restart_at: float | None = None


@dataclass
class Stack:
    settings: StackSettings
    children: list[Child] = field(default_factory=list)
    embedded: EmbeddedPostgres | None = None
    database: WatchedDatabase = field(default_factory=WatchedDatabase)
    llm_url: str | None = None  # the local LLM server's API base, once started
    dev_sign_in: DevSignIn | None = None  # the console's development sign-in, once started

    @property
    def run_dir(self) -> Path:
        return self.settings.data_dir / "run"

    def _service_env(self, jwks_path: Path, database_url: str | None) -> dict[str, str]:
        env = dict(os.environ)
        if database_url is None:
            env.pop("KNOWLEDGE_DATABASE_URL", None)  # a process without a role never connects
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
                **({"KNOWLEDGE_DATABASE_URL": database_url} if database_url is not None else {}),
                "KNOWLEDGE_EMBEDDING_MODEL": self.settings.embedding_model,
                "KNOWLEDGE_EMBEDDING_MODEL_ID": self.settings.embedding_model_id,
                "KNOWLEDGE_MAX_UPLOAD_BYTES": str(self.settings.max_upload_bytes),
                "HF_HUB_OFFLINE": "1",
                "DO_NOT_TRACK": "true",
            }
        )
        if self.llm_url is not None and self.settings.local_llm_model is not None:
            env["KNOWLEDGE_LLM_URL"] = self.llm_url
            env["KNOWLEDGE_LLM_MODEL"] = model_alias(self.settings.local_llm_model)
            env.pop("KNOWLEDGE_LLM_API_KEY", None)
        # The embedded stack serves any tenant unless told otherwise (production: false).
        env.setdefault("KNOWLEDGE_TENANTS_ENABLED_BY_DEFAULT", "true")
        # torch on cuda or mps, the int8 export on a CPU (as good there, and faster).
        env.setdefault("KNOWLEDGE_EMBEDDING_BACKEND", "auto")
        for other, port in self.settings.ports.items():
            entry = service(other)
            env[f"KNOWLEDGE_{entry.port_setting}"] = str(port)
            env[f"KNOWLEDGE_{entry.address_setting}"] = f"{self.settings.host}:{port}"
        return env

    def _spawn(self, name: str, argv: list[str], env: Mapping[str, str]) -> Child:
        log_dir = self.settings.data_dir / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / f"{name}.log"
        child = Child(name, self._popen(argv, env, log_path), log_path, argv=list(argv), env=dict(env))
        self.children.append(child)
        return child

    @staticmethod
    def _popen(argv: list[str], env: Mapping[str, str], log_path: Path) -> subprocess.Popen:
        with open(log_path, "ab") as log_file:
            return subprocess.Popen(
                argv,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # signals reach children only through us, in order
                # SIGTERM when `knowledge up` dies, even by SIGKILL: no service outlives it
                preexec_fn=die_with_parent,  # noqa: PLW1509 - prctl only, no locks taken before exec
            )

    def _database(self) -> tuple[str, dict[str, str]]:
        """The admin URL for migrations and the URL of each service that has a database role."""
        if self.settings.database_url:
            return self.settings.database_url, {e.name: self.settings.database_url for e in with_database()}
        from knowledge_runtime.db.embedded import start_embedded

        pgdata = self.settings.data_dir / "postgres"
        running = running_postmaster(pgdata)
        if running is not None:
            holders = other_holders(pgdata)
            if holders:
                raise StartupFailed(
                    f"the PostgreSQL in {pgdata} (pid {running}) is in use by process "
                    f"{', '.join(map(str, holders))}; stop that first"
                )
            say(
                f"adopting the PostgreSQL already running in {pgdata} (pid {running}), which this stack did not "
                "start; it stops with the stack"
            )
        embedded = start_embedded(self.settings.data_dir)
        self.embedded = embedded
        self.database.pid = embedded.running_pid()
        return embedded.url(), {e.name: embedded.url(e.database_role or "") for e in with_database()}

    async def start(self) -> None:
        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        jwks_path = ensure_dev_keys(self.settings.data_dir / "keys")
        admin_url, service_urls = self._database()
        await migrate(admin_url, embedding_dimension=self.settings.embedding_dimension())
        if self.settings.local_llm_model is not None:
            await self._start_local_llm(self.settings.local_llm_model)
        for name in SERVICE_NAMES:
            env = self._service_env(jwks_path, service_urls.get(name))
            self._spawn(name, [sys.executable, "-m", service(name).module], env)
        await self._wait_serving()
        self._start_gateway(jwks_path)
        await self._wait_gateway()

    async def _start_local_llm(self, model: Path) -> None:
        """The llama.cpp server as the child ``llm``, on the configured port (or one free now, kept
        for its restarts), ready (its model loaded) before the services that call it start."""
        try:
            check_model(model)
        except LocalLlmError as error:
            raise StartupFailed(str(error)) from None
        port = self.settings.local_llm_port or _free_port(self.settings.host)
        argv = server_argv(model, host=self.settings.host, port=port, threads=self.settings.local_llm_threads)
        child = self._spawn("llm", argv, os.environ)
        url = base_url(self.settings.host, port)
        await self._wait_http_ok(child, models_url(url), "the local LLM server")
        self.llm_url = url
        say(f"local LLM {model_alias(model)} serving on {url}")
        if os.environ.get("KNOWLEDGE_LLM_URL"):
            say("KNOWLEDGE_LLM_URL is set too; the services use the local LLM server instead")

    async def _wait_serving(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        for child in [c for c in self.children if c.name in SERVICE_NAMES]:
            address = f"{self.settings.host}:{self.settings.ports[child.name]}"
            if service(child.name).is_http:
                await self._wait_http_ok(child, f"http://{address}{HTTP_READINESS_PATH}", child.name)
                continue
            async with grpc.aio.insecure_channel(address) as channel:
                stub = health_pb2_grpc.HealthStub(channel)
                while True:
                    self._check_alive()
                    try:
                        reply = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=1.0)  # type: ignore[attr-defined]  # the stub's stub types it for a sync channel
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
        console = self.settings.gateway_limits.get("console_dir", CONSOLE_SOURCE_DIR)
        if console is not None and self.dev_sign_in is None:
            # The stack runs on its development key: the console may sign in with it.
            self.dev_sign_in = DevSignIn(
                jwks_path.parent, host=self.settings.host, issuer=self.settings.issuer, audience=self.settings.audience
            ).start()
        config = GatewayConfig(
            listen_host=self.settings.host,
            listen_port=self.settings.http_port,
            admin_port=self.settings.admin_port,
            upstreams={e.name: f"{self.settings.host}:{self.settings.ports[e.name]}" for e in gateway_upstreams()},
            jwks_path=jwks_path,
            issuer=self.settings.issuer,
            audience=self.settings.audience,
            descriptor_path=descriptor,
            max_body_bytes=self.settings.max_upload_bytes,
            dev_sign_in_address=self.dev_sign_in.address if self.dev_sign_in is not None else None,
            **self.settings.gateway_limits,
        )
        path = write_config(config, self.run_dir / "envoy.json")
        # --base-id keeps side-by-side stacks from sharing Envoy's shared-memory region.
        self._spawn(
            "gateway",
            [
                envoy,
                "-c",
                str(path),
                "--log-level",
                "warn",
                "--base-id",
                str(self.settings.http_port),
                "--drain-time-s",
                "1",
                "--parent-shutdown-time-s",
                "2",
                "--admin-address-path",
                str(self.admin_address_path),
            ],
            os.environ,
        )

    async def _wait_gateway(self) -> None:
        gateway = next(c for c in self.children if c.name == "gateway")
        url = f"http://{self.settings.host}:{self.settings.http_port}/healthz"
        try:
            await self._wait_http_ok(gateway, url, "the gateway")
        except StartupFailed as failed:
            # Envoy's /healthz is 503 while any upstream fails its active health check; its log
            # (at warn) does not say which, its admin endpoint does.
            raise StartupFailed(f"{failed}\n{self._unhealthy_upstreams()}") from None

    def _unhealthy_upstreams(self) -> str:
        """The gateway's upstream hosts that Envoy does not count healthy, as its admin lists them."""
        try:
            clusters = httpx.get(f"{self._gateway_admin()}/clusters", timeout=2.0).text
        except (OSError, httpx.HTTPError) as error:
            return f"(the gateway's admin endpoint did not answer: {type(error).__name__})"
        flagged = [
            line for line in clusters.splitlines() if "::health_flags::" in line and not line.endswith("::healthy")
        ]
        return "upstreams not healthy: " + ("; ".join(flagged) if flagged else "none listed")

    async def _wait_http_ok(self, child: Child, url: str, what: str) -> None:
        """Until ``url`` answers 200 (every child still alive), or StartupFailed with ``child``'s
        log tail and the last answer after START_TIMEOUT_S."""
        deadline = time.monotonic() + START_TIMEOUT_S
        last = "no answer"
        async with httpx.AsyncClient(timeout=1.0) as client:
            while True:
                self._check_alive()
                try:
                    answer = await client.get(url)
                    if answer.status_code == 200:
                        return
                    last = f"{answer.status_code} {answer.text[:200]!r}"
                except httpx.HTTPError as error:
                    last = type(error).__name__
                if time.monotonic() > deadline:
                    raise StartupFailed(f"{what} did not answer in time (last: {last})\n{child.tail()}")
                await asyncio.sleep(0.2)

    def _check_alive(self) -> None:
        for child in self.children:
            if child.process.poll() is not None:
                raise StartupFailed(f"{child.name} exited with status {child.process.returncode}\n{child.tail()}")

    def _gateway_admin(self) -> str:
        """Envoy's admin endpoint, from the file it writes its address to (OSError before it has)."""
        return "http://" + self.admin_address_path.read_text().strip()

    @property
    def admin_address_path(self) -> Path:
        return self.run_dir / "envoy-admin-address"

    @property
    def status_path(self) -> Path:
        return self.run_dir / "status.json"

    # -- supervision -----------------------------------------------------------------------

    async def supervise_once(self) -> str | None:
        """Restart what died (after its backoff); a reason to stop the stack when one keeps dying."""
        now = time.monotonic()
        policy = self.settings.restart_policy
        changed = False
        for child in self.children:
            if child.restart_at is None:
                status = child.process.poll()
                if status is None:
                    continue
                child.deaths.append(now)
                child.last_status = status
                delay = policy.delay(child.deaths, now)
                if delay is None:
                    return (
                        f"{child.name} exited with status {status}, {policy.max_restarts + 1} times within "
                        f"{policy.window_s:g}s (see {child.log_path})"
                    )
                child.restart_at = now + delay
                say(f"{child.name} exited with status {status}; restarting it in {delay:.1f}s")
                changed = True
            elif now >= child.restart_at:
                child.process = self._popen(child.argv, child.env, child.log_path)
                child.restart_at = None
                child.restarts += 1
                say(f"{child.name} restarted (pid {child.process.pid})")
                changed = True
        if self.embedded is not None:
            outcome = await self._supervise_database(now)
            if isinstance(outcome, str):
                return outcome
            changed = changed or outcome
        if changed:
            self.write_status()
        return None

    async def _supervise_database(self, now: float) -> bool | str:
        """The embedded PostgreSQL: restarted when it died, adopted (and said so) when someone else
        started it again meanwhile. True when something changed; a reason to stop when it keeps dying."""
        watched, policy, embedded = self.database, self.settings.restart_policy, self.embedded
        assert embedded is not None  # supervised only when the stack runs its own database
        pid = embedded.running_pid()
        if pid is not None and pid != watched.pid:
            say(f"{DATABASE} is running as pid {pid}, started outside the stack; adopting it (it stops with the stack)")
            watched.pid, watched.restart_at = pid, None
            return True
        if pid is not None:
            return False
        if watched.restart_at is None:
            watched.deaths.append(now)
            delay = policy.delay(watched.deaths, now)
            if delay is None:
                return f"{DATABASE} died {policy.max_restarts + 1} times within {policy.window_s:g}s"
            say(f"{DATABASE} (pid {watched.pid}) is down; restarting it in {delay:.1f}s")
            watched.pid, watched.restart_at = None, now + delay
            return True
        if now < watched.restart_at:
            return False
        try:
            watched.pid = await asyncio.to_thread(embedded.restart)
        except Exception as error:  # noqa: BLE001 - pg_ctl failed or timed out: one more death, retried after a backoff
            watched.deaths.append(now)
            delay = policy.delay(watched.deaths, now)
            if delay is None:
                return f"{DATABASE} could not be started again ({type(error).__name__}; see its log under the data dir)"
            say(f"{DATABASE} did not start ({type(error).__name__}); retrying in {delay:.1f}s")
            watched.restart_at = now + delay
            return True
        watched.restart_at = None
        watched.restarts += 1
        say(f"{DATABASE} restarted (pid {watched.pid})")
        return True

    def write_status(self) -> None:
        """``run/status.json``: each child's state (running, restarting), pid, restarts, last exit status."""
        children = {
            child.name: {
                "state": "restarting" if child.restart_at is not None else "running",
                "pid": child.process.pid,
                "restarts": child.restarts,
                "last_exit_status": child.last_status,
            }
            for child in self.children
        }
        if self.embedded is not None:
            children[DATABASE] = {
                "state": "restarting" if self.database.pid is None else "running",
                "pid": self.database.pid,
                "restarts": self.database.restarts,
                "last_exit_status": None,
            }
        document = {"updated": time.time(), "children": children}
        self.run_dir.mkdir(parents=True, exist_ok=True)
        partial = self.status_path.with_suffix(".tmp")
        partial.write_text(json.dumps(document, indent=2) + "\n")
        os.replace(partial, self.status_path)

    # -- stopping --------------------------------------------------------------------------

    def _drain_gateway(self, gateway: Child) -> None:
        """Envoy stops accepting and finishes what it has in flight (bounded), before its SIGTERM."""
        try:
            admin = self._gateway_admin()
        except OSError:
            return
        deadline = time.monotonic() + self.settings.shutdown_grace_s
        try:
            with httpx.Client(timeout=1.0) as client:
                client.post(f"{admin}/drain_listeners", params={"graceful": ""})
                while time.monotonic() < deadline and gateway.process.poll() is None:
                    stats = client.get(f"{admin}/stats", params={"filter": "downstream_rq_active$"}).text
                    if _requests_in_flight(stats) == 0:
                        return
                    time.sleep(0.05)
        except httpx.HTTPError:
            pass  # the admin endpoint is gone: Envoy is stopping anyway

    def stop(self) -> None:
        """Drain the gateway, then stop it and the services in reverse order (SIGTERM: each drains
        its calls; SIGKILL after a grace), then PostgreSQL."""
        for child in reversed(self.children):
            if child.process.poll() is None:
                if child.name == "gateway":
                    self._drain_gateway(child)
                child.process.send_signal(signal.SIGTERM)
            try:
                child.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                child.process.kill()
                child.process.wait()
        self.children.clear()
        if self.dev_sign_in is not None:
            self.dev_sign_in.stop()
            self.dev_sign_in = None
        if self.embedded is not None:
            self.embedded.shutdown()  # whichever postmaster runs on its data directory now
            self.embedded = None


def _free_port(host: str) -> int:
    import socket

    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _requests_in_flight(stats: str) -> int:
    """Envoy's ``downstream_rq_active`` gauges summed, its admin listener's own requests excluded."""
    total = 0
    for line in stats.splitlines():
        name, _, value = line.partition(": ")
        if name.endswith("downstream_rq_active") and not name.startswith("http.admin."):
            try:
                total += int(value)
            except ValueError:
                continue
    return total
