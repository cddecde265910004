"""One `knowledge up` for the contract's e2e modules: the same failures on the three paths (gRPC
to a service, REST through the gateway, gRPC through the gateway) and the TypeScript client.

Its upload cap is small (CAP) so the cap is cheap to cross, and its rate limit low (a burst of
RATE_BURST per tenant, RATE_RPS a second) so that one tenant crosses it in a few calls; every
other test uses tenants of its own.
"""

from __future__ import annotations

import pytest
from knowledge_runtime.devkeys import mint_dev_token

from tests.support.contracts import CAP, RATE_BURST, RATE_RPS
from tests.support.stack import running_stack


@pytest.fixture(scope="package")
def stack(tmp_path_factory):
    with running_stack(
        tmp_path_factory.mktemp("contracts-stack"),
        MAX_UPLOAD_BYTES=str(CAP),
        RATE_LIMIT_BURST=str(RATE_BURST),
        RATE_LIMIT_RPS=str(RATE_RPS),
    ) as running:
        env = running["env"]
        running["grpc"] = {
            "gateway": f"127.0.0.1:{running['port']}",
            "ingest": f"127.0.0.1:{env['KNOWLEDGE_INGEST_PORT']}",
            "search": f"127.0.0.1:{env['KNOWLEDGE_SEARCH_PORT']}",
        }
        yield running


@pytest.fixture(scope="package")
def token(stack):
    def make(tenant: str, capabilities: list[str] | None = None, **kwargs) -> str:
        return mint_dev_token(stack["data_dir"] / "keys", tenant=tenant, capabilities=capabilities, **kwargs)

    return make
