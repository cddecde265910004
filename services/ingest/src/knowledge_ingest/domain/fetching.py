"""Which web addresses ingest may fetch or call, decided before any connection: http and https
only, a host, and an address on the public internet, unless the operator allows that host (and
port) by ``KNOWLEDGE_FETCH_ALLOW_HOSTS`` (``KNOWLEDGE_WEBHOOK_ALLOW_HOSTS`` for webhooks). The
fetcher and the webhook sender resolve a host once, ask ``address_refusal`` about the address they
will connect to, and ask again for each new connection (and after each redirect)."""

from __future__ import annotations

import ipaddress
import posixpath
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from knowledge_ingest.domain.errors import UrlRefused

MAX_URL_CHARS = 2048
_EXTENSIONS = {
    "text/html": ".html",
    "application/xhtml+xml": ".html",
    "application/pdf": ".pdf",
    "text/plain": ".txt",
    "text/markdown": ".md",
}


@dataclass(frozen=True, slots=True)
class Target:
    scheme: str
    host: str  # lower case, IPv6 without brackets
    port: int


def parse_allow_hosts(text: str) -> frozenset[str]:
    """``host`` or ``host:port`` entries, comma separated, as ``host`` / ``host:port`` keys."""
    entries = set()
    for entry in text.split(","):
        entry = entry.strip().lower()
        if entry:
            entries.add(entry)
    return frozenset(entries)


def target(url: str) -> Target:
    """The URL's scheme, host and port, or ``UrlRefused`` saying what is wrong with it."""
    if len(url) > MAX_URL_CHARS:
        raise UrlRefused(f"the URL is longer than {MAX_URL_CHARS:,} characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise UrlRefused("the URL cannot be parsed") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise UrlRefused("only http and https URLs can be fetched")
    if not parts.hostname:
        raise UrlRefused("the URL has no host")
    if parts.username is not None or parts.password is not None:
        raise UrlRefused("URLs with a user name or password are not fetched")
    return Target(scheme, parts.hostname.lower(), port or (443 if scheme == "https" else 80))


def is_allowed(where: Target, allowed: frozenset[str]) -> bool:
    """Whether the operator's allow-list names the host, or the host and port."""
    return where.host in allowed or f"{where.host}:{where.port}" in allowed


def address_refusal(where: Target, address: str, allowed: frozenset[str]) -> str | None:
    """Why ``address`` (what ``where.host`` resolved to) must not be connected to, or None."""
    if is_allowed(where, allowed):
        return None
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return f"{where.host} is a loopback address"
    if ip.is_link_local:
        return f"{where.host} is a link-local address (cloud metadata lives there)"
    if ip.is_private:
        return f"{where.host} is a private network address"
    if not ip.is_global or ip.is_multicast:
        return f"{where.host} is not a public internet address"
    return None


def page_filename(url: str, content_type: str) -> str:
    """The document's name: the URL path's last segment, else the host; with the extension its
    content type has (``index.html``, ``report.pdf``), so the name agrees with the bytes."""
    parts = urlsplit(url)
    name = unquote(posixpath.basename(parts.path.rstrip("/"))) or (parts.hostname or "page")
    extension = _EXTENSIONS.get(content_type.split(";", 1)[0].strip().lower(), "")
    if (
        extension
        and not name.lower().endswith(extension)
        and not (extension == ".html" and name.lower().endswith(".htm"))
    ):
        name += extension
    return name[:200]
