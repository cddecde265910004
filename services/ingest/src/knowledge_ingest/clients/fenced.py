"""Connecting to an address outside, fenced: one rule for IngestUrl's fetches and for webhook
deliveries. A URL's host is resolved once, the address is checked (``domain.fetching``), and the
request goes to that address: the Host header and the TLS server name stay the URL's host, so a
second DNS answer (DNS rebinding) can never point the connection elsewhere."""

from __future__ import annotations

import asyncio
import socket
from urllib.parse import urlsplit, urlunsplit

import httpx

from knowledge_ingest.domain.errors import FetchFailed, UrlRefused
from knowledge_ingest.domain.fetching import Target, address_refusal


async def lookup(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to now (the system resolver), first choice first."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


async def resolve(where: Target, allowed: frozenset[str]) -> str:
    """The address to connect to for ``where``: FetchFailed when the host does not resolve,
    UrlRefused when its address is behind the fence (loopback, private, link-local, ...)."""
    try:
        addresses = await lookup(where.host, where.port)
    except (socket.gaierror, UnicodeError):
        raise FetchFailed(f"{where.host} cannot be resolved") from None
    if not addresses:
        raise FetchFailed(f"{where.host} cannot be resolved")
    refusal = address_refusal(where, addresses[0], allowed)
    if refusal is not None:
        raise UrlRefused(refusal)
    return addresses[0]


def request_to(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    where: Target,
    address: str,
    headers: dict[str, str],
    content: bytes | None = None,
) -> httpx.Request:
    """A request for ``url`` sent to ``address`` (what ``resolve`` checked), with the URL's host
    as its Host header and, over TLS, as the server name the certificate is checked against."""
    return client.build_request(
        method,
        at_address(url, address),
        headers={"Host": host_header(where), **headers},
        content=content,
        extensions={"sni_hostname": where.host} if where.scheme == "https" else {},
    )


def at_address(url: str, address: str) -> str:
    parts = urlsplit(url)
    host = f"[{address}]" if ":" in address else address
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))


def host_header(where: Target) -> str:
    host = f"[{where.host}]" if ":" in where.host else where.host
    default = 443 if where.scheme == "https" else 80
    return host if where.port == default else f"{host}:{where.port}"
