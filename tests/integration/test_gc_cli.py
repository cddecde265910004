"""`knowledge gc` against a real content-index over real PostgreSQL and real files: a
dry run removes nothing, --apply frees what it reported, and the report says what it freed."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import asyncpg
import pytest
from knowledge_runtime.devkeys import KEY_ID_FILE, PRIVATE_KEY_FILE

from tests.support.content_index import age, rows_with_hash, running_content_index, sha256_hex, unique_bytes, write

pytestmark = pytest.mark.integration

KNOWLEDGE = Path(sys.executable).parent / "knowledge"


async def knowledge_gc(address: str, keys_dir: Path, *args: str) -> tuple[int, str, str]:
    """The console script, as the CronJob runs it: the service key from KNOWLEDGE_SERVICE_KEY_PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")}
    env |= {
        "KNOWLEDGE_SERVICE_KEY_PATH": str(keys_dir / PRIVATE_KEY_FILE),
        "KNOWLEDGE_SERVICE_KEY_ID": (keys_dir / KEY_ID_FILE).read_text().strip(),
        "KNOWLEDGE_CONTENT_INDEX_ADDRESS": address,
    }
    process = await asyncio.create_subprocess_exec(
        str(KNOWLEDGE), "gc", *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await process.communicate()
    return process.returncode, out.decode(), err.decode()


async def test_a_dry_run_removes_nothing_and_apply_frees_what_it_reported(
    content_db, migrated_pg, verifier, keys_dir, make_service_token, tmp_path
):
    admin = await asyncpg.connect(migrated_pg.url())
    try:
        async with running_content_index(content_db, tmp_path / "blobs", verifier) as service:
            data = unique_bytes(50_000)
            blob = await write(service.stub, make_service_token("gc-cli", ["blob.write"]), data)
            await age(admin, blob.blob.blob_id)  # unreferenced, last written two days ago
            path = service.root / blob.blob.storage_uri
            assert path.exists()

            code, out, err = await knowledge_gc(service.address, keys_dir, "--json")
            assert code == 0, err
            dry = json.loads(out)
            assert dry["applied"] is False and dry["removed_count"] >= 1 and dry["freed_bytes"] >= len(data)
            assert path.exists() and await rows_with_hash(admin, sha256_hex(data)) == 1  # nothing removed

            code, out, err = await knowledge_gc(service.address, keys_dir, "--apply")
            assert code == 0, err
            assert out.startswith("removed ") and "blob(s)" in out
            assert not path.exists() and await rows_with_hash(admin, sha256_hex(data)) == 0

            code, out, _ = await knowledge_gc(service.address, keys_dir)  # verify: nothing of it is left
            assert code == 0 and out.startswith("dry run (nothing removed; --apply removes): would remove ")
    finally:
        await admin.close()


async def test_gc_without_a_reachable_content_index_says_so(keys_dir):
    code, _, err = await knowledge_gc("127.0.0.1:1", keys_dir)
    assert code == 8 and "UNAVAILABLE" in err


async def test_the_local_stack_pass_frees_what_nothing_references(content_db, migrated_pg, tmp_path, capsys):
    """What `knowledge up` runs every KNOWLEDGE_GC_EVERY_S: an applied pass with the stack's own key."""
    from dataclasses import replace

    from knowledge_cli.stack import Stack
    from knowledge_cli.stack_settings import StackSettings
    from knowledge_cli.up import collect_garbage_once
    from knowledge_runtime.auth import TokenVerifier
    from knowledge_runtime.devkeys import ensure_dev_keys, mint_dev_token
    from knowledge_runtime.settings import DEFAULT_JWT_AUDIENCE, DEFAULT_JWT_ISSUER, Env

    keys = ensure_dev_keys(tmp_path / "data" / "keys").parent
    verifier = TokenVerifier.from_file(keys / "jwks.json", issuer=DEFAULT_JWT_ISSUER, audience=DEFAULT_JWT_AUDIENCE)
    assert StackSettings.from_env(Env({})).gc_every_s == 3600
    assert StackSettings.from_env(Env({"KNOWLEDGE_GC_EVERY_S": "0"})).gc_every_s == 0  # off
    admin = await asyncpg.connect(migrated_pg.url())
    try:
        async with running_content_index(content_db, tmp_path / "blobs", verifier) as service:
            data = unique_bytes(30_000)
            writer = mint_dev_token(keys, tenant="gc-stack", capabilities=["blob.write"], service="tests")
            blob = await write(service.stub, writer, data)
            await age(admin, blob.blob.blob_id)
            port = int(service.address.rsplit(":", 1)[1])
            settings = StackSettings.from_env(Env({"KNOWLEDGE_DATA_DIR": str(tmp_path / "data")}))
            settings = replace(settings, ports={**settings.ports, "content-index": port})
            await collect_garbage_once(Stack(settings))
            assert await rows_with_hash(admin, sha256_hex(data)) == 0
            assert "garbage collection: removed " in capsys.readouterr().err
    finally:
        await admin.close()
