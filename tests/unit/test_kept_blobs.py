"""The blobs ingest keeps after writing them, for the job that reads them next: bounded in size
per blob and in all, expiring, handed out once, and only to the tenant that wrote them."""

import pytest
from knowledge_ingest.clients.kept_blobs import KeptBlobs


async def _chunks(*parts: bytes):
    for part in parts:
        yield part


async def _consume(stream) -> bytes:
    return b"".join([chunk async for chunk in stream])


async def test_the_recorder_passes_the_stream_through_and_keeps_a_copy_only_of_a_small_one():
    kept = KeptBlobs(max_blob_bytes=10)
    stream, recorded = kept.recorder(_chunks(b"abc", b"def"))
    assert await _consume(stream) == b"abcdef" and recorded() == b"abcdef"
    stream, recorded = kept.recorder(_chunks(b"abcdef", b"ghijkl"))
    assert await _consume(stream) == b"abcdefghijkl"  # all of it still goes to content-index
    assert recorded() is None


def test_an_entry_is_handed_out_once_and_only_to_its_tenant():
    kept = KeptBlobs()
    kept.keep("acme", 1, b"text")
    assert kept.take("globex", 1) is None
    assert kept.take("acme", 1) == b"text"
    assert kept.take("acme", 1) is None


def test_entries_expire_and_the_oldest_make_room_within_the_bound():
    now = [0.0]
    kept = KeptBlobs(max_blob_bytes=4, max_total_bytes=8, ttl_s=10.0, clock=lambda: now[0])
    kept.keep("t", 1, b"aaaa")
    kept.keep("t", 2, b"bbbb")
    kept.keep("t", 3, b"cccc")  # the bound is 8 bytes: blob 1, the oldest, goes
    kept.keep("t", 4, b"too large")  # over the per-blob bound: not kept
    assert [kept.take("t", blob) for blob in (1, 4)] == [None, None]
    now[0] = 10.0  # blob 2 and 3's time is up
    assert kept.take("t", 2) is None and kept.take("t", 3) is None
    kept.keep("t", 5, b"eeee")
    kept.keep("t", 6, b"ffff")
    assert kept.take("t", 5) == b"eeee" and kept.take("t", 6) == b"ffff"  # the expired made room


@pytest.mark.parametrize("again", [b"x", b"yyyy"])
def test_keeping_a_blob_again_replaces_it_and_counts_it_once(again):
    kept = KeptBlobs(max_blob_bytes=4, max_total_bytes=8)
    kept.keep("t", 1, b"aaaa")
    kept.keep("t", 1, again)
    kept.keep("t", 2, b"bbbb")  # fits beside blob 1 only if blob 1 is counted once
    assert kept.take("t", 1) == again and kept.take("t", 2) == b"bbbb"
