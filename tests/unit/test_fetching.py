"""The fence of IngestUrl, decided before any connection (domain.fetching)."""

from __future__ import annotations

import pytest
from knowledge_ingest.domain.errors import UrlRefused
from knowledge_ingest.domain.fetching import address_refusal, page_filename, parse_allow_hosts, target

PUBLIC = target("https://example.com/a")


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("10.0.0.5", "private"),
        ("192.168.1.1", "private"),
        ("172.16.3.4", "private"),
        ("fd00:ec2::254", "private"),
        ("0.0.0.0", "private"),
        ("100.64.0.1", "not a public"),
        ("224.0.0.1", "not a public"),
    ],
)
def test_non_public_addresses_are_refused_with_the_reason(address, why):
    assert why in (address_refusal(PUBLIC, address, frozenset()) or "")


def test_public_addresses_and_allowed_hosts_pass():
    assert address_refusal(PUBLIC, "93.184.216.34", frozenset()) is None
    assert address_refusal(PUBLIC, "2606:2800:220:1:248:1893:25c8:1946", frozenset()) is None
    allowed = parse_allow_hosts(" intranet.local , 127.0.0.1:8080,")
    assert allowed == {"intranet.local", "127.0.0.1:8080"}
    assert address_refusal(target("http://intranet.local:9000/"), "10.0.0.5", allowed) is None
    assert address_refusal(target("http://127.0.0.1:8080/"), "127.0.0.1", allowed) is None
    assert address_refusal(target("http://127.0.0.1:8081/"), "127.0.0.1", allowed) is not None  # another port


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://example.com/f", "only http and https"),
        ("javascript:alert(1)", "only http and https"),
        ("http:///path", "no host"),
        ("https://user:pw@example.com/", "user name"),
        ("http://example.com:99999/", "cannot be parsed"),
        ("https://example.com/" + "a" * 2100, "longer"),
    ],
)
def test_malformed_urls_are_refused(url, why):
    with pytest.raises(UrlRefused) as refused:
        target(url)
    assert why in str(refused.value) and refused.value.reason == "URL_REFUSED"


def test_the_documents_name_agrees_with_the_content_type():
    assert page_filename("https://example.com/docs/guide", "text/html") == "guide.html"
    assert page_filename("https://example.com/docs/guide.htm", "text/html") == "guide.htm"
    assert page_filename("https://example.com/", "text/html") == "example.com.html"
    assert page_filename("https://example.com/r/report.pdf?x=1", "application/pdf") == "report.pdf"
    assert page_filename("https://example.com/notes", "text/plain") == "notes.txt"
    assert page_filename("https://example.com/a%20b.docx", "application/octet-stream") == "a b.docx"
