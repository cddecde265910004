"""content-index as its own process with its blobs on the S3 test server (moto's, standing in for
MinIO or S3): a 200 MB blob streams in and out with flat memory, and a process killed in the
middle of an upload, while the client streams or while the bytes are being sent to the store,
leaves no object, and once it is back, no incomplete multipart upload and no spool file."""

from __future__ import annotations

import asyncio
import hashlib
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from knowledge.v1 import content_index_pb2 as pb
from knowledge.v1 import content_index_pb2_grpc

from tests.support.net import free_port
from tests.support.object_store import S3Server
from tests.support.processes import module, service_env, wait_serving
from tests.support.rpc import auth

pytestmark = pytest.mark.integration

MB = 1024 * 1024
NAMED = "knowledge.v1.ContentIndexService"


@pytest.fixture(scope="module")
def s3() -> S3Server:
    server = S3Server()
    yield server
    server.close()


class Service:
    """One content-index process; ``start()`` again after a kill runs its successor."""

    def __init__(self, env: dict[str, str], address: str, spool: Path) -> None:
        self.env, self.address, self.spool = env, address, spool
        self.process: subprocess.Popen | None = None

    async def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", module("content-index")],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        await wait_serving(self.address, NAMED, self.process)

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)

    def peak_rss(self) -> int:
        """The process's resident-memory high-water mark (VmHWM), in bytes."""
        assert self.process is not None
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmHWM")

    def spooled(self) -> list[Path]:
        return sorted((self.spool / ".staging").glob("*")) if (self.spool / ".staging").exists() else []


@pytest.fixture
async def service(s3, migrated_pg, keys_dir, tmp_path):
    bucket = s3.new_bucket()
    port = free_port()
    env = service_env(
        "content-index",
        port,
        migrated_pg,
        keys_dir,
        tmp_path,
        **s3.settings(bucket),
        KNOWLEDGE_MAX_UPLOAD_BYTES=str(256 * MB),
        KNOWLEDGE_METRICS_PORT="0",
        KNOWLEDGE_LOG_LEVEL="warning",
    )
    running = Service(env, f"127.0.0.1:{port}", tmp_path / "blobs")
    running.bucket = bucket
    await running.start()
    yield running
    running.stop()
    s3.slow_parts(0)


def pieces(total: int, seed: int, piece: int = MB):
    """``total`` pseudo-random bytes in pieces, never whole in memory."""
    generator = random.Random(seed)
    for start in range(0, total, piece):
        yield generator.randbytes(min(piece, total - start))


async def stream(stub, token: str, total: int, seed: int, digest, hold: asyncio.Event | None = None, after=0):
    async def requests():
        yield pb.WriteBlobRequest(header=pb.WriteBlobHeader(filename="big.pdf", expected_size_bytes=total))
        sent = 0
        for data in pieces(total, seed):
            digest.update(data)
            yield pb.WriteBlobRequest(chunk=data)
            sent += len(data)
            if hold is not None and sent >= after:
                await hold.wait()

    return await stub.WriteBlob(requests(), metadata=auth(token), timeout=600)


async def read_digest(stub, token: str, blob_id: str) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    async for message in stub.ReadBlob(pb.ReadBlobRequest(blob_id=blob_id), metadata=auth(token), timeout=600):
        if message.WhichOneof("payload") == "chunk":
            digest.update(message.chunk)
            size += len(message.chunk)
    return digest.hexdigest(), size


async def test_a_200_mb_blob_streams_in_and_out_with_flat_memory(s3, service, make_service_token):
    token = make_service_token(tenant="s3-big")
    async with grpc.aio.insecure_channel(service.address) as channel:
        stub = content_index_pb2_grpc.ContentIndexServiceStub(channel)
        # Warm up every path (a multipart upload, a read) so the baseline holds what they load.
        warm = await stream(stub, token, 20 * MB, seed=1, digest=hashlib.sha256())
        await read_digest(stub, token, warm.blob.blob_id)
        baseline = service.peak_rss()

        sent = hashlib.sha256()
        written = await stream(stub, token, 200 * MB, seed=2, digest=sent)
        after_upload = service.peak_rss()
        read, size = await read_digest(stub, token, written.blob.blob_id)
        after_read = service.peak_rss()

    key = f"blobs/{sent.hexdigest()[:2]}/{sent.hexdigest()}.pdf"
    assert written.blob.size_bytes == size == 200 * MB and read == sent.hexdigest()
    assert s3.client.head_object(Bucket=service.bucket, Key=key)["ContentLength"] == 200 * MB
    assert s3.incomplete_uploads(service.bucket) == []
    # Whole in memory would add at least 200 MB; streamed, the peak grows by a few parts at most.
    print(
        f"peak RSS growth: upload {(after_upload - baseline) / MB:.1f} MiB, read {(after_read - after_upload) / MB:.1f} MiB"
    )
    assert after_upload - baseline < 48 * MB
    assert after_read - baseline < 48 * MB


async def test_a_kill_while_the_client_streams_leaves_nothing_in_the_store(s3, service, make_service_token):
    token = make_service_token(tenant="s3-killed")
    hold = asyncio.Event()
    async with grpc.aio.insecure_channel(service.address) as channel:
        stub = content_index_pb2_grpc.ContentIndexServiceStub(channel)
        upload = asyncio.create_task(stream(stub, token, 200 * MB, 3, hashlib.sha256(), hold, after=60 * MB))
        deadline = time.monotonic() + 60
        while not any(p.name.startswith(".partial.") and p.stat().st_size >= 40 * MB for p in service.spooled()):
            assert time.monotonic() < deadline and not upload.done(), "the upload never reached the spool"
            await asyncio.sleep(0.05)
        service.kill()
        hold.set()
        with pytest.raises(grpc.aio.AioRpcError):
            await upload
    assert s3.keys(service.bucket) == [] and s3.incomplete_uploads(service.bucket) == []
    assert service.spooled(), "the killed process's spool should still be there"
    await service.start()  # its successor removes the spool nobody holds
    assert service.spooled() == []
    assert s3.keys(service.bucket) == [] and s3.incomplete_uploads(service.bucket) == []


async def test_a_kill_while_the_bytes_go_to_the_store_leaves_no_object_and_no_parts(s3, service, make_service_token):
    token = make_service_token(tenant="s3-killed-sending")
    s3.slow_parts(0.5)  # the multipart upload takes seconds: the kill lands in it
    async with grpc.aio.insecure_channel(service.address) as channel:
        stub = content_index_pb2_grpc.ContentIndexServiceStub(channel)
        upload = asyncio.create_task(stream(stub, token, 60 * MB, 4, hashlib.sha256()))
        deadline = time.monotonic() + 120
        while not s3.incomplete_uploads(service.bucket):
            assert time.monotonic() < deadline and not upload.done(), "no multipart upload was seen in flight"
            await asyncio.sleep(0.05)
        service.kill()
        with pytest.raises(grpc.aio.AioRpcError):
            await upload
    assert s3.keys(service.bucket) == []
    assert s3.incomplete_uploads(service.bucket), "the kill should have cut a multipart upload off"
    s3.slow_parts(0)
    await service.start()  # its successor aborts the upload its predecessor's record names
    assert s3.incomplete_uploads(service.bucket) == [] and s3.keys(service.bucket) == []
    assert service.spooled() == []
