"""The system corpora's names and capabilities, shared by ingest (which writes them) and search
(which reads them for pre-fetch).

A tenant's housekeeping corpora are ``corpora`` rows of the tenant with ``is_system``, created on
demand; platform-wide corpora are ``is_system`` rows without a tenant.
"""

from __future__ import annotations

from knowledge_runtime.auth import PLATFORM_ADMIN

SYSTEM_WRITE = "system.write"  # capability of the platform services that keep the housekeeping corpora
# platform.admin (auth.PLATFORM_ADMIN) also curates the platform-wide corpora.
PLATFORM_CAPABILITIES = (SYSTEM_WRITE, PLATFORM_ADMIN)  # never in a token unless named
OPERATIONAL_PATTERNS = "operational_patterns"
USER_BEHAVIOR = "user_behavior"
DATA_CATALOG = "data_catalog"
HOUSEKEEPING_CORPORA = (OPERATIONAL_PATTERNS, USER_BEHAVIOR, DATA_CATALOG)
# Housekeeping documents an agent's prompt context never counts (their filenames start so).
HOUSEKEEPING_FILENAME_PREFIXES = ("_system_seed_", "_provisional_entries", "_extracted_patterns")
