"""Content-index settings and the embedded stack's content key file."""

import stat
import threading

import pytest
from knowledge_content_index.adapters.keyfile import KeyFileError, load_or_create_key
from knowledge_content_index.bootstrap import content_keyring
from knowledge_content_index.config import ContentIndexSettings, ObjectStoreSettings
from knowledge_content_index.domain.identity import ContentKeyring
from knowledge_runtime.settings import Env, SettingsError

SECRET = "ab" * 32


def settings(tmp_path, **values: str) -> ContentIndexSettings:
    return ContentIndexSettings.from_env(Env({"KNOWLEDGE_DATA_DIR": str(tmp_path), **values}))


def test_defaults(tmp_path):
    s = settings(tmp_path)
    assert s.blob_root == tmp_path / "blobs" and s.common.max_upload_bytes == 100 * 1024 * 1024
    assert s.gc_grace.total_seconds() == 86400 and s.gc_min_age.total_seconds() == 3600
    assert s.content_key is None and s.key_file == tmp_path / "keys" / "content-key"


def test_the_content_key_is_read_but_never_shown(tmp_path):
    s = settings(tmp_path, KNOWLEDGE_CONTENT_KEY=SECRET)
    assert s.content_key == bytes.fromhex(SECRET)
    assert SECRET not in repr(s) and "171, 171" not in repr(s)


@pytest.mark.parametrize("bad", ["tooshort", "ab" * 16, "!" * 64])
def test_an_unusable_content_key_is_refused_without_echoing_it(tmp_path, bad):
    with pytest.raises(SettingsError, match="KNOWLEDGE_CONTENT_KEY") as caught:
        settings(tmp_path, KNOWLEDGE_CONTENT_KEY=bad)
    assert bad not in str(caught.value)


def test_the_minimum_gc_age_may_not_exceed_the_grace_period(tmp_path):
    with pytest.raises(SettingsError, match="KNOWLEDGE_BLOB_GC_MIN_AGE_S"):
        settings(tmp_path, KNOWLEDGE_BLOB_GC_GRACE_S="60", KNOWLEDGE_BLOB_GC_MIN_AGE_S="120")


def test_the_key_file_is_created_once_private_and_reused(tmp_path):
    path = tmp_path / "keys" / "content-key"
    keys, barrier = [], threading.Barrier(8)

    def start():
        barrier.wait()
        keys.append(load_or_create_key(path))

    threads = [threading.Thread(target=start) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(keys)) == 1 and len(keys[0]) == 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in path.parent.iterdir()) == ["content-key"]
    assert load_or_create_key(path) == keys[0]


def test_a_damaged_key_file_stops_the_start_naming_the_file(tmp_path):
    path = tmp_path / "keys" / "content-key"
    path.parent.mkdir()
    path.write_text("garbage")
    with pytest.raises(KeyFileError, match="content-key"):
        load_or_create_key(path)
    with pytest.raises(SettingsError, match="KNOWLEDGE_CONTENT_KEY"):
        content_keyring(settings(tmp_path))


def test_the_configured_key_wins_over_the_file(tmp_path):
    keyring = content_keyring(settings(tmp_path, KNOWLEDGE_CONTENT_KEY=SECRET))
    assert not (tmp_path / "keys").exists()
    assert keyring.tenant_key("t") == ContentKeyring(bytes.fromhex(SECRET)).tenant_key("t")


def test_the_filesystem_is_the_default_store(tmp_path):
    assert settings(tmp_path).object_store is None


def test_the_object_store_settings(tmp_path):
    s = settings(
        tmp_path,
        KNOWLEDGE_BLOB_STORE="s3",
        KNOWLEDGE_BLOB_S3_BUCKET="knowledge-blobs",
        KNOWLEDGE_BLOB_S3_PREFIX="/prod/blobs/",
        KNOWLEDGE_BLOB_S3_ENDPOINT="https://minio.example:9000",
        KNOWLEDGE_BLOB_S3_REGION="eu-west-1",
    )
    assert s.object_store == ObjectStoreSettings(
        "knowledge-blobs", "prod/blobs", "https://minio.example:9000", "eu-west-1"
    )
    assert s.blob_root == tmp_path / "blobs"  # the local spool of uploads being received
    plain = settings(tmp_path, KNOWLEDGE_BLOB_STORE="s3", KNOWLEDGE_BLOB_S3_BUCKET="knowledge-blobs")
    assert plain.object_store == ObjectStoreSettings("knowledge-blobs")


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"KNOWLEDGE_BLOB_STORE": "gcs"}, "KNOWLEDGE_BLOB_STORE"),
        ({"KNOWLEDGE_BLOB_STORE": "s3"}, "KNOWLEDGE_BLOB_S3_BUCKET"),
        ({"KNOWLEDGE_BLOB_STORE": "s3", "KNOWLEDGE_BLOB_S3_BUCKET": "No_Such"}, "KNOWLEDGE_BLOB_S3_BUCKET"),
        (
            {"KNOWLEDGE_BLOB_STORE": "s3", "KNOWLEDGE_BLOB_S3_BUCKET": "blobs", "KNOWLEDGE_BLOB_S3_PREFIX": "a/../b"},
            "KNOWLEDGE_BLOB_S3_PREFIX",
        ),
        (
            {
                "KNOWLEDGE_BLOB_STORE": "s3",
                "KNOWLEDGE_BLOB_S3_BUCKET": "blobs",
                "KNOWLEDGE_BLOB_S3_ENDPOINT": "minio:9000",
            },
            "KNOWLEDGE_BLOB_S3_ENDPOINT",
        ),
    ],
)
def test_object_store_settings_are_checked_at_start(tmp_path, values, named):
    with pytest.raises(SettingsError, match=named):
        settings(tmp_path, **values)
