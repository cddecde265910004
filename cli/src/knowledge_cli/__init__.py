"""The `knowledge` command line."""
