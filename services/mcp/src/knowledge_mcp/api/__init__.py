"""The MCP side: the tools, their output schemas, and the runner that keeps the result contract."""
