"""The web console: static files the gateway serves itself, from the API's own origin.

The console (``knowledge_gateway/console/``: plain ES modules, one CSS file, no build step) is a
client of the public REST API only, with the user's token, so it needs no process of its own:
each file is an Envoy direct response read from disk when Envoy starts (the OpenAPI description
is served the same way). ``/`` is its page; its files are under ``/console/``; nothing else is
routed there, so a path it lacks is the API's 404.

``/console/config.json`` tells the page what this deployment offers: whether the development
sign-in is routed. That sign-in (``/console/dev-token``) exists only where the configuration
names an address for it, which only ``knowledge up`` does (its supervisor mints tokens with the
stack's development key, ``knowledge_cli.dev_sign_in``); a rendered deployment never routes it.

The pages are served with a Content-Security-Policy that allows scripts, styles and connections
to this origin only: nothing is fetched from anywhere else at run time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from knowledge_gateway.config import GatewayConfig

SOURCE_DIR = Path(__file__).parent / "console"
PREFIX = "/console/"
INDEX = "index.html"
CONFIG_PATH = "/console/config.json"
DEV_TOKEN_PATH = "/console/dev-token"
DEV_SIGN_IN_CLUSTER = "dev-sign-in"
DEV_SIGN_IN_TIMEOUT_S = 10
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}
# Same origin only; `data:` images for the inline favicon (no /favicon.ico request, no 404).
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


def console_files() -> list[str]:
    """The console's files, by name (a flat folder: a Kubernetes ConfigMap holds them as keys)."""
    return sorted(p.name for p in SOURCE_DIR.iterdir() if p.is_file() and p.suffix in CONTENT_TYPES)


def _headers(content_type: str) -> list[dict]:
    values = {
        "content-type": content_type,
        # Revalidated on each load: a new release is picked up without a stale module graph.
        "cache-control": "no-cache",
        "content-security-policy": CONTENT_SECURITY_POLICY,
        "x-content-type-options": "nosniff",
        "referrer-policy": "no-referrer",
    }
    return [
        {"header": {"key": k, "value": v}, "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"} for k, v in values.items()
    ]


def _get(match: dict) -> dict:
    return {**match, "headers": [{"name": ":method", "string_match": {"safe_regex": {"regex": "GET|HEAD"}}}]}


def console_config(config: GatewayConfig) -> dict:
    """What the page reads at ``/console/config.json``."""
    return {"dev_sign_in": config.dev_sign_in_address is not None}


def console_routes(config: GatewayConfig) -> list[dict]:
    """The page at ``/`` and ``/console/``, each file at ``/console/<name>``, the page's settings,
    and the development sign-in where configured; none of them when the console is off."""
    if config.console_dir is None:
        return []
    directory = config.console_dir
    routes: list[dict] = []
    if config.dev_sign_in_address is not None:
        routes.append(
            {
                "match": {
                    "path": DEV_TOKEN_PATH,
                    "headers": [{"name": ":method", "string_match": {"exact": "POST"}}],
                },
                "route": {"cluster": DEV_SIGN_IN_CLUSTER, "timeout": f"{DEV_SIGN_IN_TIMEOUT_S}s"},
            }
        )
    routes.append(
        {
            "match": _get({"path": CONFIG_PATH}),
            "direct_response": {"status": 200, "body": {"inline_string": json.dumps(console_config(config))}},
            "response_headers_to_add": _headers("application/json"),
        }
    )
    page = {"status": 200, "body": {"filename": str(directory / INDEX)}}
    for path in ("/", PREFIX):
        routes.append(
            {
                "match": _get({"path": path}),
                "direct_response": page,
                "response_headers_to_add": _headers(CONTENT_TYPES[".html"]),
            }
        )
    for name in console_files():
        routes.append(
            {
                "match": _get({"path": PREFIX + name}),
                "direct_response": {"status": 200, "body": {"filename": str(directory / name)}},
                "response_headers_to_add": _headers(CONTENT_TYPES[Path(name).suffix]),
            }
        )
    return routes


def dev_sign_in_cluster(config: GatewayConfig) -> list[dict]:
    """The development sign-in's upstream (HTTP/1.1 on the loopback), where configured."""
    if config.dev_sign_in_address is None or config.console_dir is None:
        return []
    host, _, port = config.dev_sign_in_address.rpartition(":")
    return [
        {
            "name": DEV_SIGN_IN_CLUSTER,
            "type": "STATIC",
            "connect_timeout": "2s",
            "load_assignment": {
                "cluster_name": DEV_SIGN_IN_CLUSTER,
                "endpoints": [
                    {
                        "lb_endpoints": [
                            {"endpoint": {"address": {"socket_address": {"address": host, "port_value": int(port)}}}}
                        ]
                    }
                ],
            },
        }
    ]
