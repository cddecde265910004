"""``python -m knowledge_gateway.render --out DIR``: Envoy's files for a deployment.

Writes ``envoy.json`` (the bootstrap), ``knowledge.pb`` (the descriptor set the
transcoder reads), ``openapi.json`` (the description the gateway serves) and ``console/`` (the
web console's files, unless ``KNOWLEDGE_CONSOLE_ENABLED=false``; mounted at
``/etc/knowledge/console``) for Envoy running
in a container, e.g. a Kubernetes pod that mounts all three at ``/etc/envoy``. The upstreams, issuer and audience come from the same ``KNOWLEDGE_*``
settings the services read: from the ``--env-file`` files in order (later ones win), or,
when none is given, from the environment. ``k8s/`` keeps the output of this command next to
the ``config.env`` it was rendered from, and a test fails when the two drift apart.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from knowledge_runtime.registry import public_http_services, public_services
from knowledge_runtime.settings import (
    DEFAULT_HTTP_PORT,
    Env,
    SettingsError,
    jwt_audience,
    jwt_issuer,
    max_upload_bytes,
    service_address,
)

from knowledge_gateway.config import GatewayConfig, console_enabled, limits_from_env
from knowledge_gateway.console import SOURCE_DIR as CONSOLE_SOURCE_DIR
from knowledge_gateway.console import console_files
from knowledge_gateway.descriptors import write_descriptor_set
from knowledge_gateway.envoy import write_config
from knowledge_gateway.openapi import openapi_text

CONFIG_NAME = "envoy.json"
DESCRIPTOR_NAME = "knowledge.pb"
OPENAPI_NAME = "openapi.json"
# Where the container finds its files: the gateway's ConfigMap is mounted at /etc/envoy.
DEFAULT_CONFIG_DIR = "/etc/envoy"
# The web console's files: a ConfigMap of their own, mounted there (k8s/base/gateway.yaml).
DEFAULT_CONSOLE_DIR = "/etc/knowledge/console"
CONSOLE_NAME = "console"  # the folder of --out the console's files are copied to
DEFAULT_JWKS_PATH = "/etc/knowledge/jwks/jwks.json"
DEFAULT_ADMIN_PORT = 9901


def read_env_files(paths: Sequence[Path]) -> dict[str, str]:
    """``KEY=VALUE`` lines (the format of kustomize's ``envs:``), later files winning."""
    values: dict[str, str] = {}
    for path in paths:
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, sep, value = line.partition("=")
            if not sep or not key.strip():
                raise SettingsError(f"{path}:{number}: expected KEY=VALUE")
            values[key.strip()] = value.strip()
    return values


def gateway_config(
    environ: Mapping[str, str], *, config_dir: str = DEFAULT_CONFIG_DIR, console_dir: str = DEFAULT_CONSOLE_DIR
) -> GatewayConfig:
    """The gateway's configuration for a container, from ``KNOWLEDGE_*`` values."""
    env = Env(environ)
    upstreams = {entry.name: service_address(entry.name, env) for entry in public_services()}
    # An HTTP process (the MCP adapter) is routed only where its address is configured.
    upstreams |= {e.name: address for e in public_http_services() if (address := env.str(e.address_setting))}
    return GatewayConfig(
        listen_host=env.str("GATEWAY_HOST", "0.0.0.0") or "0.0.0.0",
        listen_port=env.port("HTTP_PORT", DEFAULT_HTTP_PORT),
        admin_port=env.port("ENVOY_ADMIN_PORT", DEFAULT_ADMIN_PORT),
        upstreams=upstreams,
        jwks_path=Path(env.str("JWKS_PATH", DEFAULT_JWKS_PATH) or DEFAULT_JWKS_PATH),
        issuer=jwt_issuer(env),
        audience=jwt_audience(env),
        descriptor_path=Path(config_dir) / DESCRIPTOR_NAME,
        openapi_path=Path(config_dir) / OPENAPI_NAME,
        max_body_bytes=max_upload_bytes(env),
        # Never a development sign-in: a rendered deployment has no development key.
        console_dir=Path(console_dir) if console_enabled(env) else None,
        dev_sign_in_address=None,
        **limits_from_env(env),
    )


def write(out: Path, config: GatewayConfig, *, descriptor: bool = True) -> list[Path]:
    written = [write_config(config, out / CONFIG_NAME)]
    if descriptor:
        written.append(write_descriptor_set(out / DESCRIPTOR_NAME))
        openapi = out / OPENAPI_NAME
        openapi.write_text(openapi_text())
        written.append(openapi)
        console = out / CONSOLE_NAME
        console.mkdir(exist_ok=True)
        for name in console_files():
            target = console / name
            target.write_bytes((CONSOLE_SOURCE_DIR / name).read_bytes())
            written.append(target)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m knowledge_gateway.render", description="Write Envoy's bootstrap and descriptor set."
    )
    parser.add_argument("--out", type=Path, required=True, help="folder for envoy.json, knowledge.pb and openapi.json")
    parser.add_argument(
        "--env-file",
        type=Path,
        action="append",
        default=[],
        help="KEY=VALUE file with KNOWLEDGE_* settings (repeatable, later wins); default: the environment",
    )
    parser.add_argument(
        "--config-dir",
        default=DEFAULT_CONFIG_DIR,
        help=f"where Envoy finds knowledge.pb and openapi.json at run time (default {DEFAULT_CONFIG_DIR})",
    )
    parser.add_argument(
        "--console-dir",
        default=DEFAULT_CONSOLE_DIR,
        help=f"where Envoy finds the web console's files at run time (default {DEFAULT_CONSOLE_DIR})",
    )
    parser.add_argument(
        "--skip-descriptor",
        action="store_true",
        help="write envoy.json only (an overlay that keeps the base's knowledge.pb and openapi.json)",
    )
    options = parser.parse_args(argv)
    try:
        environ = read_env_files(options.env_file) if options.env_file else dict(os.environ)
        config = gateway_config(environ, config_dir=options.config_dir, console_dir=options.console_dir)
        written = write(options.out, config, descriptor=not options.skip_descriptor)
    except (SettingsError, OSError) as error:
        print(f"knowledge-gateway: {error}", file=sys.stderr)
        return 2
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
