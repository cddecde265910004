"""Content-index's domain: blob identity, naming, errors and the ports the use cases need."""
