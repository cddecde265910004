"""The limits of a tenant's taxonomy: one constant each, enforced by this domain (``taxonomy`` and
``processing``) and stated by the gateway's OpenAPI description, which reads them here."""

TYPE_NAME_PATTERN = r"^[a-z][a-z0-9_]*$"  # lowercase letters, digits and '_', starting with a letter
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 2_000  # a type's description, and the reason it was added
MAX_EXAMPLES = 20
MAX_EXAMPLE_CHARS = 1_000
UNCLASSIFIED = "unclassified"  # the name a proposal without a model gets; never a stored type
MAX_SCHEMA_CHARS = 100_000  # an extraction schema's JSON text
