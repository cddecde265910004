"""Passages by reference: a platform service's own passages under its own reference (PassageService)."""
