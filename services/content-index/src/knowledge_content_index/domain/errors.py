"""Content-index's domain errors; each declares its status code through its runtime base class."""

from __future__ import annotations

from knowledge_runtime.errors import (
    DomainError,
    FailedPrecondition,
    InvalidArgument,
    InvalidField,
    NotFound,
    Unavailable,
)

# An upload over the cap is the runtime's UploadTooLarge, the same error ingest raises.


class InvalidWriteStream(InvalidArgument):
    """A WriteBlob stream that is not exactly one header followed by chunks."""

    reason = "WRITE_STREAM_INVALID"


class InvalidBlobRequest(InvalidField):
    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(field, message)


class ContentHashMismatch(InvalidArgument):
    reason = "CONTENT_HASH_MISMATCH"

    def __init__(self) -> None:
        super().__init__("the file's content does not match content_hash and size_bytes")


class BlobNotFound(NotFound):
    reason = "BLOB_NOT_FOUND"

    def __init__(self) -> None:
        super().__init__("no such blob")


class BlobFileMissing(FailedPrecondition):
    """EnsureBlob was pointed at a file that is not there (any more)."""

    reason = "BLOB_FILE_MISSING"

    def __init__(self) -> None:
        super().__init__("no file at storage_uri; write it again and retry")


class BlobContentMissing(DomainError):
    """A blob's row exists but its bytes are gone: storage lost them."""

    code = "DATA_LOSS"
    reason = "BLOB_CONTENT_MISSING"

    def __init__(self) -> None:
        super().__init__("the blob's content is missing from storage")


class BlobInUse(FailedPrecondition):
    """Raised by a repository when deleting a blob row that something still references."""

    reason = "BLOB_IN_USE"

    def __init__(self) -> None:
        super().__init__("the blob is still referenced")


class BlobStoreUnavailable(Unavailable):
    """The blob store (an object store) did not answer, or kept failing, after its retries: the
    caller may retry; readiness turns NOT_SERVING meanwhile."""

    reason = "BLOB_STORE_UNAVAILABLE"

    def __init__(self) -> None:
        super().__init__("the blob store is unavailable; retry later")
