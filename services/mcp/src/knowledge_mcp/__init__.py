"""The knowledge tools over the Model Context Protocol (``knowledge-mcp``, ``knowledge mcp``)."""
