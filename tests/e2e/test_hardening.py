"""Hardening, the services' side, through the whole stack (`knowledge up`, Envoy, the real services):
what an attacker with a default token and a careless client could do before."""

from __future__ import annotations

import grpc
import httpx
import pytest
from knowledge.v1 import content_index_pb2, content_index_pb2_grpc, embedder_pb2, embedder_pb2_grpc

from tests.support.stack import BIN, running_stack

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("hardening-stack")) as running:
        yield running


def cli_token(stack, *args: str) -> str:
    import subprocess

    done = subprocess.run(
        [str(BIN / "knowledge"), "dev-token", "--tenant", "acme", *args],
        env=stack["env"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def headers(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


async def test_the_default_dev_token_cannot_reach_the_internal_services(stack):
    """Item 1: the CLI's dev token carries no blob.* or embed; content-index and the embedder refuse it."""
    token = [("authorization", f"Bearer {cli_token(stack)}")]
    env = stack["env"]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{env['KNOWLEDGE_CONTENT_INDEX_PORT']}") as channel:
        stub = content_index_pb2_grpc.ContentIndexServiceStub(channel)
        for call in (
            stub.StatBlob(content_index_pb2.StatBlobRequest(blob_id="1"), metadata=token),
            stub.FindByHash(content_index_pb2.FindByHashRequest(content_hash="0" * 64), metadata=token),
            stub.EnsureBlob(content_index_pb2.EnsureBlobRequest(content_hash="0" * 64), metadata=token),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await call
            assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    async with grpc.aio.insecure_channel(f"127.0.0.1:{env['KNOWLEDGE_EMBEDDER_PORT']}") as channel:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await embedder_pb2_grpc.EmbedderServiceStub(channel).Info(embedder_pb2.InfoRequest(), metadata=token)
        assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
        # Asked for explicitly, a development service token does reach them.
        internal = [("authorization", f"Bearer {cli_token(stack, '--internal')}")]
        await embedder_pb2_grpc.EmbedderServiceStub(channel).Info(embedder_pb2.InfoRequest(), metadata=internal)


def test_user_errors_are_4xx_through_the_gateway(stack):
    """Items 9, 10, 11: non-ASCII and aliasing ids are 404, a NUL is 400 naming its field, a
    malformed multipart body is 400; none is a 500."""
    base, auth = stack["base"], headers(cli_token(stack))
    corpus = httpx.post(f"{base}/corpora", json={"name": "Hardening"}, headers=auth)
    assert corpus.status_code == 200, corpus.text
    corpus_id = corpus.json()["corpus_id"]
    for document_id in ("²", "١", "１", "01", "+1", "-1", "0", "9223372036854775808"):
        reply = httpx.get(f"{base}/documents/{document_id}", headers=auth)
        assert reply.status_code == 404, (document_id, reply.status_code, reply.text)
    for path in (f"0{corpus_id}", "²"):
        assert httpx.get(f"{base}/corpora/{path}/documents", headers=auth).status_code == 404
    assert httpx.get(f"{base}/corpora/{corpus_id}/documents", headers=auth).status_code == 200

    for body, field in (
        ({"corpus_id": corpus_id, "text": "t", "source_url": "https://example.com/\u0000"}, "source_url"),
        ({"corpus_id": corpus_id, "text": "a\u0000b"}, "text"),
        ({"corpus_id": corpus_id, "text": "t", "title": "\u0000"}, "title"),
    ):
        reply = httpx.post(f"{base}/texts", json=body, headers=auth)
        assert reply.status_code == 400, reply.text
        assert reply.json()["details"][0]["metadata"]["field"] == field
    reply = httpx.post(f"{base}/corpora", json={"name": "a\u0000b"}, headers=auth)
    assert reply.status_code == 400 and reply.json()["details"][0]["reason"] == "NUL_CHARACTER"

    malformed = (
        b'--B\r\nContent-Disposition: form-data; name="corpus_id"\r\n\r\n'
        + corpus_id.encode()
        + b'\r\n--B\r\nContent-Disposition: form-data; name="file"\rfilename="x.txt"\r\n\r\nabc\r\n--B--\r\n'
    )
    reply = httpx.post(
        f"{base}/upload", content=malformed, headers={**auth, "Content-Type": "multipart/form-data; boundary=B"}
    )
    assert reply.status_code == 400, reply.text
    listed = httpx.get(f"{base}/corpora/{corpus_id}/documents", headers=auth).json()
    assert not listed.get("documents")
