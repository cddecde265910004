"""Deletion at once with tombstones, and the workers that remove what it left."""
