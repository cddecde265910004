"""``knowledge-mcp`` (``python -m knowledge_mcp``): the MCP adapter over Streamable HTTP."""

from __future__ import annotations

import asyncio
import sys

from knowledge_runtime.entrypoint import prepare
from knowledge_runtime.settings import SettingsError

from knowledge_mcp.config import SERVICE, McpSettings
from knowledge_mcp.http import serve_http


def main() -> None:
    try:
        settings = McpSettings.from_env()
        verifier = prepare(settings.common)
        asyncio.run(serve_http(settings, verifier))
    except SettingsError as error:
        print(f"knowledge-{SERVICE}: configuration error: {error}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
