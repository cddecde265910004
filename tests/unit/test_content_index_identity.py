"""Blob identity: plain SHA-256 vs a tenant's HMAC, the documented key derivation, no key leaks."""

import base64
import hashlib
import hmac

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from knowledge_content_index.domain.identity import (
    HMAC_PREFIX,
    SALT,
    ContentHash,
    ContentKeyring,
    decode_master_key,
)

MASTER = bytes(range(32))
DATA = b"the same bytes"


def test_a_sharing_tenant_gets_plain_sha256():
    hasher = ContentKeyring(MASTER).hasher("acme", isolated=False)
    hasher.update(DATA[:5])
    hasher.update(DATA[5:])
    result = hasher.finish()
    assert str(result) == hashlib.sha256(DATA).hexdigest() and not result.keyed


def test_an_isolated_tenant_gets_its_own_prefixed_hmac():
    keyring = ContentKeyring(MASTER)
    hashes_ = {}
    for tenant in ("a", "b"):
        hasher = keyring.hasher(tenant, isolated=True)
        hasher.update(DATA)
        hashes_[tenant] = str(hasher.finish())
    assert hashes_["a"] != hashes_["b"]
    assert all(h.startswith(HMAC_PREFIX) and len(h) == len(HMAC_PREFIX) + 64 for h in hashes_.values())
    assert hashlib.sha256(DATA).hexdigest() not in hashes_.values()
    # Deterministic: another keyring from the same master derives the same identity.
    again = ContentKeyring(MASTER).hasher("a", isolated=True)
    again.update(DATA)
    assert str(again.finish()) == hashes_["a"]


def test_the_tenant_key_is_hkdf_sha256_as_documented():
    expected = HKDF(algorithm=hashes.SHA256(), length=32, salt=SALT, info="tenant:acme-\u00e9".encode()).derive(MASTER)
    key = ContentKeyring(MASTER).tenant_key("acme-\u00e9")
    assert key == expected
    hasher = ContentKeyring(MASTER).hasher("acme-\u00e9", isolated=True)
    hasher.update(DATA)
    assert hasher.finish().digest == hmac.new(expected, DATA, hashlib.sha256).hexdigest()


def test_another_master_key_gives_other_tenant_keys():
    assert ContentKeyring(MASTER).tenant_key("t") != ContentKeyring(bytes(32)).tenant_key("t")


def test_keys_never_show_in_reprs():
    keyring = ContentKeyring(MASTER)
    hasher = keyring.hasher("t", isolated=True)
    for text in (repr(keyring), str(keyring), repr(hasher)):
        assert MASTER.hex() not in text and keyring.tenant_key("t").hex() not in text
    assert "redacted" in repr(keyring)


def test_a_short_master_key_is_refused():
    with pytest.raises(ValueError):
        ContentKeyring(b"short")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (MASTER.hex(), MASTER),
        (MASTER.hex().upper() + "\n", MASTER),
        (base64.b64encode(MASTER).decode(), MASTER),
        (base64.urlsafe_b64encode(bytes([251] * 40)).decode().rstrip("="), bytes([251] * 40)),
        ("00" * 31, None),
        ("not a key at all!", None),
        ("", None),
    ],
)
def test_master_keys_decode_from_hex_or_base64(text, expected):
    assert decode_master_key(text) == expected


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("a" * 64, ("a" * 64, False)),
        ("A" * 64, ("a" * 64, False)),
        ("hmac-sha256:" + "b" * 64, ("b" * 64, True)),
        ("HMAC-SHA256:" + "b" * 64, ("b" * 64, True)),
        ("a" * 63, None),
        ("sha256:" + "a" * 64, None),
        ("hmac-sha256:" + "g" * 64, None),
        ("../../" + "a" * 58, None),
    ],
)
def test_content_hashes_parse_in_both_forms_only(text, parsed):
    result = ContentHash.parse(text)
    assert (None if result is None else (result.digest, result.keyed)) == parsed
    if result is not None:
        assert ContentHash.parse(str(result)) == result
