"""Document AI: classify, extract and process documents against a per-tenant taxonomy."""
