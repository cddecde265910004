"""Fenced imports from the operator's roots, change findings and scheduled passes (ImportService)."""
