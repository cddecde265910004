"""Changing the embedding model: re-embedding into the store search does not read, the gate, the
swap, the rollback and the drop of the old vectors (ModelChangeService)."""
