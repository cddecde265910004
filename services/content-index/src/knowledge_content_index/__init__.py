"""Content-index service: content-addressed blobs, dedup, reference counts and garbage collection."""
