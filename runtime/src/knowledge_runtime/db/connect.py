"""How a service finds its database: ``KNOWLEDGE_DATABASE_URL`` or the embedded default."""

from __future__ import annotations

from collections.abc import Mapping

import asyncpg

from knowledge_runtime import registry
from knowledge_runtime.db.pool import Database
from knowledge_runtime.errors import Unavailable
from knowledge_runtime.settings import CommonSettings, SettingsError


def service_database_url(common: CommonSettings) -> str:
    """The configured URL as given, else the embedded cluster as this service's own role."""
    if common.database_url:
        return common.database_url
    role = registry.service(common.service).database_role
    if role is None:
        raise SettingsError(f"{common.service} has no database role: it never connects to the database")
    from knowledge_runtime.db.embedded import start_embedded

    return start_embedded(common.data_dir).url(role)


async def connect_service_database(
    common: CommonSettings, *, max_size: int = 10, server_settings: Mapping[str, str] | None = None
) -> Database:
    url = service_database_url(common)
    try:
        return await Database.connect(url, max_size=max_size, server_settings=server_settings)
    except asyncpg.InvalidAuthorizationSpecificationError:
        raise SettingsError(
            f"KNOWLEDGE_DATABASE_URL: the role of {common.service} cannot log in; run `knowledge migrate` first"
        ) from None
    except asyncpg.InvalidCatalogNameError:
        raise SettingsError("KNOWLEDGE_DATABASE_URL: the database does not exist") from None
    except Unavailable:
        raise SettingsError("KNOWLEDGE_DATABASE_URL: the database cannot be reached") from None
    except asyncpg.PostgresError as error:
        raise SettingsError(f"KNOWLEDGE_DATABASE_URL: cannot use the database ({error.sqlstate})") from None
