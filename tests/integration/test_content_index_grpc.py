"""ContentIndexService on a real gRPC server (port 0) over real PostgreSQL and real files."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import jwt
import pytest
from knowledge.v1 import content_index_pb2 as pb
from knowledge_content_index.domain.naming import EXTENSIONS
from knowledge_runtime.auth import ALL_CAPABILITIES
from knowledge_runtime.devkeys import KEY_ID_FILE, PRIVATE_KEY_FILE

from tests.support.content_index import (
    MAX_UPLOAD_BYTES,
    eventually,
    files_under,
    read_all,
    reference,
    rows_with_hash,
    running_content_index,
    sha256_hex,
    unique_bytes,
    write,
    write_with_sync_client,
)
from tests.support.rpc import auth, error_info

pytestmark = pytest.mark.integration


@pytest.fixture
async def service(content_db, verifier, tmp_path):
    async with running_content_index(content_db, tmp_path / "blobs", verifier) as harness:
        yield harness


def content_files(root: Path) -> list[Path]:
    return [p for p in files_under(root) if ".staging" not in p.parts]


def place(root: Path, digest: str, content: bytes) -> Path:
    """A caller's own file for EnsureBlob, where the blob layout puts it: <root>/<hash[:2]>/<hash>.txt."""
    path = root / digest[:2] / f"{digest}.txt"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(content)
    return path


def located(service, path: Path) -> str:
    """A blob's storage_uri as callers see it: its path under the blob root."""
    return path.relative_to(service.root).as_posix()


def staged(root: Path) -> list[Path]:
    return [p for p in files_under(root) if ".staging" in p.parts]


async def test_a_blob_round_trips_with_its_identity(service, make_service_token):
    token = make_service_token("ci-roundtrip")
    data = unique_bytes(300_000)
    written = await write(service.stub, token, data, filename="Quarterly Report.PDF", mime_type="application/pdf")
    blob = written.blob
    assert not written.already_existed
    assert blob.content_hash == sha256_hex(data) and blob.size_bytes == len(data)
    assert blob.mime_type == "application/pdf" and blob.create_time.seconds > 0
    expected = service.root / blob.content_hash[:2] / f"{blob.content_hash}.pdf"
    assert blob.storage_uri == located(service, expected)  # never the server's absolute path
    assert content_files(service.root) == [expected] and staged(service.root) == []
    meta, content = await read_all(service.stub, token, blob.blob_id)
    assert meta == blob and content == data
    _, middle = await read_all(service.stub, token, blob.blob_id, offset=1000, limit=5000)
    assert middle == data[1000:6000]
    _, tail = await read_all(service.stub, token, blob.blob_id, offset=len(data) - 10)
    assert tail == data[-10:]
    stat = await service.stub.StatBlob(pb.StatBlobRequest(blob_id=blob.blob_id), metadata=auth(token))
    assert stat.blob == blob and stat.file_present


async def test_fifty_concurrent_writes_of_the_same_bytes_make_one_row_and_one_file(service, make_service_token, admin):
    data = unique_bytes(300_000)
    tokens = [make_service_token(f"ci-fifty-{i % 5}") for i in range(50)]
    results = await asyncio.gather(*(write(service.stub, token, data) for token in tokens))
    assert len({r.blob.blob_id for r in results}) == 1
    # Each tenant is told of its own dedup hits only: a first write of bytes another holds looks new.
    assert sorted(r.already_existed for r in results) == [False] * 5 + [True] * 45
    assert await rows_with_hash(admin, sha256_hex(data)) == 1
    files = content_files(service.root)
    assert len(files) == 1 and files[0].read_bytes() == data
    assert staged(service.root) == []


async def test_crossing_the_size_cap_fails_at_once_leaving_nothing(service, make_service_token, admin):
    token = make_service_token("ci-cap")
    rows_before = await admin.fetchval("SELECT count(*) FROM content_blobs")

    def endless():
        while True:  # the server must end the call once the cap is crossed, or this never ends
            yield os.urandom(64 * 1024)

    header = pb.WriteBlobHeader(filename="big.bin")
    with pytest.raises(grpc.RpcError) as caught:
        await asyncio.to_thread(write_with_sync_client, service.address, token, header, endless())
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error_info(caught.value).reason == "UPLOAD_TOO_LARGE"
    await eventually(lambda: files_under(service.root) == [])
    assert await admin.fetchval("SELECT count(*) FROM content_blobs") == rows_before


async def test_a_declared_size_above_the_cap_is_refused_before_any_byte(service, make_service_token):
    call = service.stub.WriteBlob(metadata=auth(make_service_token("ci-cap2")))
    await call.write(pb.WriteBlobRequest(header=pb.WriteBlobHeader(expected_size_bytes=MAX_UPLOAD_BYTES + 1)))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await asyncio.wait_for(call, 30)  # no byte sent and the stream still open: the header alone is refused
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error_info(caught.value).reason == "UPLOAD_TOO_LARGE"
    assert files_under(service.root) == []


async def test_exactly_the_cap_is_accepted(service, make_service_token):
    data = unique_bytes(MAX_UPLOAD_BYTES)
    written = await write(service.stub, make_service_token("ci-cap3"), data)
    assert written.blob.size_bytes == MAX_UPLOAD_BYTES


async def test_a_writer_that_disconnects_mid_stream_leaves_no_file_and_no_row(service, make_service_token, admin):
    rows_before = await admin.fetchval("SELECT count(*) FROM content_blobs")

    async def half_then_hang():
        yield pb.WriteBlobRequest(header=pb.WriteBlobHeader(filename="half.pdf"))
        yield pb.WriteBlobRequest(chunk=os.urandom(200_000))
        await asyncio.Event().wait()

    call = service.stub.WriteBlob(half_then_hang(), metadata=auth(make_service_token("ci-disconnect")))
    await eventually(lambda: any(p.stat().st_size == 200_000 for p in staged(service.root)))
    call.cancel()
    await eventually(lambda: files_under(service.root) == [])
    assert await admin.fetchval("SELECT count(*) FROM content_blobs") == rows_before


KILLED_CLIENT = """
import os, sys, time
import grpc
from knowledge.v1 import content_index_pb2 as pb, content_index_pb2_grpc

def requests():
    yield pb.WriteBlobRequest(header=pb.WriteBlobHeader(filename="killed.pdf"))
    yield pb.WriteBlobRequest(chunk=os.urandom(200_000))
    time.sleep(3600)

channel = grpc.insecure_channel(sys.argv[1])
stub = content_index_pb2_grpc.ContentIndexServiceStub(channel)
stub.WriteBlob(requests(), metadata=[("authorization", "Bearer " + os.environ["TOKEN"])])
"""


async def test_a_writer_killed_mid_stream_leaves_no_file_and_no_row(service, make_service_token, admin):
    rows_before = await admin.fetchval("SELECT count(*) FROM content_blobs")
    client = subprocess.Popen(
        [sys.executable, "-c", KILLED_CLIENT, service.address],
        env={**os.environ, "TOKEN": make_service_token("ci-killed")},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        await eventually(lambda: any(p.stat().st_size == 200_000 for p in staged(service.root)), timeout=60)
        client.send_signal(signal.SIGKILL)
        client.wait(timeout=10)
    finally:
        if client.poll() is None:
            client.kill()
    await eventually(lambda: files_under(service.root) == [], timeout=30)
    assert await admin.fetchval("SELECT count(*) FROM content_blobs") == rows_before


@pytest.mark.parametrize(
    "messages",
    [
        [pb.WriteBlobRequest(chunk=b"no header first")],
        [pb.WriteBlobRequest(header=pb.WriteBlobHeader()), pb.WriteBlobRequest(header=pb.WriteBlobHeader())],
        [],
    ],
    ids=["chunk-first", "two-headers", "empty"],
)
async def test_a_malformed_stream_is_invalid_argument_and_leaves_nothing(service, make_service_token, messages):
    async def stream():
        for message in messages:
            yield message

    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await service.stub.WriteBlob(stream(), metadata=auth(make_service_token("ci-malformed")))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(caught.value).reason == "WRITE_STREAM_INVALID"
    assert files_under(service.root) == []


async def test_isolated_tenants_never_share_and_the_others_do(service, make_service_token, admin):
    for tenant, isolated in [("ci-iso-a", True), ("ci-iso-b", True), ("ci-plain-c", False), ("ci-plain-d", False)]:
        await admin.execute(
            "INSERT INTO tenants (tenant_id, isolate_content) VALUES ($1, $2) "
            "ON CONFLICT (tenant_id) DO UPDATE SET isolate_content = $2",
            tenant,
            isolated,
        )
    data = unique_bytes(100_000)
    iso_a = await write(service.stub, make_service_token("ci-iso-a"), data)
    iso_b = await write(service.stub, make_service_token("ci-iso-b"), data)
    plain = [await write(service.stub, make_service_token(t), data) for t in ("ci-plain-c", "ci-plain-d", "ci-no-row")]

    # Each isolated tenant gets its own blob, named by its own keyed hash.
    for result, tenant in [(iso_a, "ci-iso-a"), (iso_b, "ci-iso-b")]:
        digest = hmac.new(service.keyring.tenant_key(tenant), data, hashlib.sha256).hexdigest()
        assert result.blob.content_hash == f"hmac-sha256:{digest}"
        assert not result.already_existed
        assert service.keyring.tenant_key(tenant).hex() not in result.SerializeToString().hex()
    assert iso_a.blob.blob_id != iso_b.blob.blob_id and iso_a.blob.content_hash != iso_b.blob.content_hash
    # Tenants that do not isolate (a missing tenant row included) share one plain SHA-256 blob.
    assert {p.blob.blob_id for p in plain} == {plain[0].blob.blob_id}
    assert plain[0].blob.content_hash == sha256_hex(data)
    assert [p.already_existed for p in plain] == [False, False, False]  # none is told of the others
    assert plain[0].blob.blob_id not in {iso_a.blob.blob_id, iso_b.blob.blob_id}
    assert len(content_files(service.root)) == 3
    # The same isolated tenant writing again dedups with itself.
    again = await write(service.stub, make_service_token("ci-iso-a"), data)
    assert again.already_existed and again.blob.blob_id == iso_a.blob.blob_id


async def test_other_tenants_see_nothing_of_yours(service, make_service_token, admin):
    owner, other = make_service_token("ci-owner"), make_service_token("ci-other")
    data = unique_bytes(50_000)
    blob = (await write(service.stub, owner, data)).blob
    document_id = await reference(admin, "ci-owner", blob.blob_id)

    found = await service.stub.FindByHash(pb.FindByHashRequest(content_hash=blob.content_hash), metadata=auth(owner))
    assert found.blob == blob
    assert [(r.entity_type, r.entity_id) for r in found.references] == [("document", document_id)]
    assert found.references[0].corpus_id

    nothing = await service.stub.FindByHash(pb.FindByHashRequest(content_hash=blob.content_hash), metadata=auth(other))
    assert not nothing.HasField("blob") and list(nothing.references) == []
    for call in (
        service.stub.StatBlob(pb.StatBlobRequest(blob_id=blob.blob_id), metadata=auth(other)),
        service.stub.CountReferences(pb.CountReferencesRequest(blob_id=blob.blob_id), metadata=auth(other)),
        read_all(service.stub, other, blob.blob_id),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        assert error_info(caught.value).reason == "BLOB_NOT_FOUND"

    # Writing the same bytes makes the blob the other tenant's too, but never shows it the owner's references.
    await write(service.stub, other, data)
    shared = await service.stub.FindByHash(pb.FindByHashRequest(content_hash=blob.content_hash), metadata=auth(other))
    assert shared.blob.blob_id == blob.blob_id and list(shared.references) == []


async def test_no_tenant_reaches_another_tenants_blob_or_learns_that_it_exists(
    service, make_service_token, make_token, keys_dir
):
    """A user's token (any of them) has no blob capability; a service working for
    another tenant cannot claim the blob by naming its hash and path, and is told nothing by a write."""
    owner, intruder = make_service_token("ci-victim"), make_service_token("ci-intruder")
    data = unique_bytes(40_000)
    written = await write(service.stub, owner, data, filename="secret.pdf")
    blob = written.blob
    path = service.root / blob.content_hash[:2] / f"{blob.content_hash}.pdf"

    # A user's token: no internal capability, even when its issuer listed them all.
    user = make_token("ci-intruder")
    kid = (keys_dir / KEY_ID_FILE).read_text().strip()
    forged = jwt.encode(
        {
            "iss": "knowledge-dev",
            "aud": "knowledge",
            "exp": int(time.time()) + 60,
            "sub": "alice",
            "tenant": "ci-intruder",
            "capabilities": list(ALL_CAPABILITIES),
        },
        (keys_dir / PRIVATE_KEY_FILE).read_bytes(),
        algorithm="RS256",
        headers={"kid": kid},
    )
    for token in (user, forged):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await read_all(service.stub, token, blob.blob_id)
        assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED

    # EnsureBlob of the victim's hash and its very file: NOT_FOUND, and it grants nothing after.
    ensure = pb.EnsureBlobRequest(content_hash=blob.content_hash, storage_uri=path.as_uri(), size_bytes=len(data))
    for call in (
        service.stub.EnsureBlob(ensure, metadata=auth(intruder)),
        service.stub.StatBlob(pb.StatBlobRequest(blob_id=blob.blob_id), metadata=auth(intruder)),
        read_all(service.stub, intruder, blob.blob_id),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND, caught.value
        assert error_info(caught.value).reason == "BLOB_NOT_FOUND"
    assert path.read_bytes() == data

    # Writing the same bytes (which it then holds) is answered as a new blob: no existence oracle.
    await asyncio.sleep(1.1)
    mine = await write(service.stub, intruder, data, filename="guess.pdf")
    assert not mine.already_existed and mine.blob.blob_id == blob.blob_id  # still stored once
    assert mine.blob.create_time.seconds > blob.create_time.seconds
    stat = await service.stub.StatBlob(pb.StatBlobRequest(blob_id=blob.blob_id), metadata=auth(intruder))
    assert stat.blob.create_time.seconds > blob.create_time.seconds
    for reply in (written, mine, stat):
        assert reply.blob.storage_uri == f"{blob.content_hash[:2]}/{blob.content_hash}.pdf"
        assert str(service.root) not in str(reply)


async def test_reference_counts_are_live_across_tables_and_per_tenant(service, make_service_token, admin):
    token = make_service_token("ci-counts")
    blob = (await write(service.stub, token, unique_bytes(10_000))).blob

    async def counts():
        request = pb.CountReferencesRequest(blob_id=blob.blob_id)
        reply = await service.stub.CountReferences(request, metadata=auth(token))
        return reply.total, {c.entity_type: c.count for c in reply.by_entity_type}

    assert await counts() == (0, {"document": 0, "ingest_job": 0})
    first = await reference(admin, "ci-counts", blob.blob_id)
    await reference(admin, "ci-counts-elsewhere", blob.blob_id)
    await reference(admin, "ci-counts", blob.blob_id, job=True)
    # Another tenant's reference to the same (shared) blob is not counted for this one.
    assert await counts() == (2, {"document": 1, "ingest_job": 1})
    await admin.execute("DELETE FROM documents WHERE document_id = $1", int(first))
    assert await counts() == (1, {"document": 0, "ingest_job": 1})


async def test_heal_on_write_repairs_a_row_whose_file_vanished(service, make_service_token):
    token = make_service_token("ci-heal")
    data = unique_bytes(120_000)
    blob = (await write(service.stub, token, data, filename="a.pdf")).blob
    path = content_files(service.root)[0]
    path.unlink()
    stat = await service.stub.StatBlob(pb.StatBlobRequest(blob_id=blob.blob_id), metadata=auth(token))
    assert not stat.file_present
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await read_all(service.stub, token, blob.blob_id)
    assert caught.value.code() == grpc.StatusCode.DATA_LOSS

    again = await write(service.stub, token, data, filename="a.pdf")
    assert again.already_existed and again.blob.blob_id == blob.blob_id
    stat = await service.stub.StatBlob(pb.StatBlobRequest(blob_id=blob.blob_id), metadata=auth(token))
    assert stat.file_present and path.read_bytes() == data
    assert (await read_all(service.stub, token, blob.blob_id))[1] == data


async def test_a_truncated_file_is_healed_like_a_missing_one(service, make_service_token):
    token = make_service_token("ci-heal-truncated")
    data = unique_bytes(120_000)
    blob = (await write(service.stub, token, data)).blob
    path = content_files(service.root)[0]
    path.write_bytes(data[:100])
    again = await write(service.stub, token, data)
    assert again.blob.blob_id == blob.blob_id and path.read_bytes() == data


async def test_ensure_blob_registers_heals_and_verifies_the_callers_file(service, make_service_token):
    token = make_service_token("ci-ensure")
    data = unique_bytes(80_000)
    digest = sha256_hex(data)
    placed = place(service.root, digest, data)
    request = pb.EnsureBlobRequest(
        content_hash=digest, storage_uri=placed.as_uri(), size_bytes=len(data), mime_type="text/plain; charset=utf-8"
    )
    first = await service.stub.EnsureBlob(request, metadata=auth(token))
    assert not first.already_existed and not first.healed
    assert first.blob.storage_uri == located(service, placed) and first.blob.mime_type == "text/plain"
    second = await service.stub.EnsureBlob(request, metadata=auth(token))
    assert second.already_existed and not second.healed and second.blob.blob_id == first.blob.blob_id

    # The row's file vanishes; the caller stores the bytes again under another extension: healed.
    placed.unlink()
    other = placed.with_suffix(".md")
    other.write_bytes(data)
    healed = await service.stub.EnsureBlob(
        pb.EnsureBlobRequest(content_hash=digest, storage_uri=other.as_uri(), size_bytes=len(data)),
        metadata=auth(token),
    )
    assert healed.healed and healed.already_existed and healed.blob.blob_id == first.blob.blob_id
    assert healed.blob.storage_uri == located(service, other)

    # A redundant copy under yet another name is dropped: one file per hash.
    copy = placed.with_suffix(".csv")
    copy.write_bytes(data)
    kept = await service.stub.EnsureBlob(
        pb.EnsureBlobRequest(content_hash=digest, storage_uri=copy.as_uri(), size_bytes=len(data)), metadata=auth(token)
    )
    assert kept.blob.storage_uri == located(service, other) and not copy.exists()
    assert content_files(service.root) == [other]

    # Another spelling of the row's own path is the same file: kept, never removed as a copy.
    shard = digest[:2]
    path_part = other.as_uri()[len("file://") :].replace(f"/{shard}/", f"/%{ord(shard[0]):02x}{shard[1]}/")
    respelled = f"file://localhost{path_part}"  # host and a percent-encoded shard: the same file
    same = await service.stub.EnsureBlob(
        pb.EnsureBlobRequest(content_hash=digest, storage_uri=respelled, size_bytes=len(data)), metadata=auth(token)
    )
    assert same.blob.storage_uri == located(service, other) and other.read_bytes() == data


async def test_ensure_blob_stores_one_spelling_per_path(service, make_service_token, admin):
    token = make_service_token("ci-ensure-spelling")
    data = unique_bytes(3_000)
    digest = sha256_hex(data)
    path = place(service.root, digest, data)
    respelled = "file://localhost" + path.as_uri()[len("file://") :]
    ensured = await service.stub.EnsureBlob(
        pb.EnsureBlobRequest(content_hash=digest, storage_uri=respelled, size_bytes=len(data)), metadata=auth(token)
    )
    assert ensured.blob.storage_uri == located(service, path)
    stored = await admin.fetchval("SELECT storage_uri FROM content_blobs WHERE blob_id = $1", int(ensured.blob.blob_id))
    assert stored == path.as_uri()  # one spelling in the row


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("wrong-bytes", "CONTENT_HASH_MISMATCH"),
        ("wrong-size", "CONTENT_HASH_MISMATCH"),
        ("outside-root", "INVALID_REQUEST"),
        ("other-hash-path", "INVALID_REQUEST"),
        ("keyed-hash-for-plain-tenant", "INVALID_REQUEST"),
        ("malformed-hash", "INVALID_REQUEST"),
        ("missing-file", "BLOB_FILE_MISSING"),
    ],
)
async def test_ensure_blob_refuses_what_it_cannot_verify(service, make_service_token, admin, case, reason):
    token = make_service_token("ci-ensure-bad")
    data = unique_bytes(5_000)
    digest = sha256_hex(data)
    path = place(service.root, digest, b"not the content" if case == "wrong-bytes" else data)
    request = pb.EnsureBlobRequest(content_hash=digest, storage_uri=path.as_uri(), size_bytes=len(data))
    if case == "wrong-size":
        request.size_bytes = len(data) - 1
    elif case == "outside-root":
        request.storage_uri = Path("/etc/passwd").as_uri()
    elif case == "other-hash-path":
        request.storage_uri = (service.root / "00" / f"{'0' * 64}.txt").as_uri()
    elif case == "keyed-hash-for-plain-tenant":
        request.content_hash = f"hmac-sha256:{digest}"
    elif case == "malformed-hash":
        request.content_hash = "../../etc/passwd"
    elif case == "missing-file":
        path.unlink()
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await service.stub.EnsureBlob(request, metadata=auth(token))
    assert error_info(caught.value).reason == reason
    assert await rows_with_hash(admin, digest) == 0


NASTY_NAMES = {
    "../../etc/passwd": "",
    "a/b\\c": "",
    "x" * 10_240: "",
    "y" * 10_240 + ".docx": ".docx",
    "C:\\Windows\\System32\\drivers\\etc\\hosts": "",
    "../../../outside/x.pdf": ".pdf",
    "..": "",
    ".pdf": "",
    "": "",
    "report.final.PDF": ".pdf",
    "notes.txt/../../..": "",
    "name.sh": "",
}


async def test_hostile_filenames_are_stored_safely(service, make_service_token, tmp_path):
    token = make_service_token("ci-names")
    before = set(tmp_path.parent.iterdir())
    for name, extension in NASTY_NAMES.items():
        data = unique_bytes(2_000)
        blob = (await write(service.stub, token, data, filename=name)).blob
        expected = service.root / blob.content_hash[:2] / f"{blob.content_hash}{extension}"
        assert blob.storage_uri == located(service, expected), repr(name[:40])
        assert expected.read_bytes() == data
        assert (await read_all(service.stub, token, blob.blob_id))[1] == data
    for path in content_files(service.root):
        assert path.parent.parent == service.root
        assert path.suffix in {""} | {f".{e}" for e in EXTENSIONS}
    assert set(tmp_path.parent.iterdir()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blobs"]
    assert not (service.root / "etc").exists() and not (service.root / "../../../outside/x.pdf").resolve().exists()
    # A NUL is refused like in every other string field of every service (no text holds one).
    for name in ("evil\x00.pdf", "evil.exe\x00.pdf"):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await write(service.stub, token, unique_bytes(100), filename=name)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_info(caught.value).metadata["field"] == "header.filename"


async def test_a_read_out_of_range_or_of_an_unknown_blob_says_so(service, make_service_token):
    token = make_service_token("ci-ranges")
    blob = (await write(service.stub, token, unique_bytes(1000))).blob
    for offset, limit in [(-1, 0), (1001, 0), (0, -5)]:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await read_all(service.stub, token, blob.blob_id, offset=offset, limit=limit)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    _, empty = await read_all(service.stub, token, blob.blob_id, offset=1000)
    assert empty == b""
    for blob_id in ("999999999999", "abc", "-1", "99999999999999999999999"):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await service.stub.StatBlob(pb.StatBlobRequest(blob_id=blob_id), metadata=auth(token))
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND


async def test_each_rpc_needs_its_capability(service, make_service_token):
    reader = auth(make_service_token("ci-caps", ["blob.read"]))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await service.stub.WriteBlob(iter_once(pb.WriteBlobRequest(header=pb.WriteBlobHeader())), metadata=reader)
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await service.stub.CollectGarbage(pb.CollectGarbageRequest(dry_run=True), metadata=reader)
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert error_info(caught.value).metadata["capability"] == "blob.admin"


async def iter_once(message):
    yield message
