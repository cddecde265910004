"""The limits of a tenant's taxonomy: one constant each, enforced by this domain (``taxonomy`` and
``processing``) and stated by the gateway's OpenAPI description, which reads them here."""

TYPE_NAME_PATTERN = r"^[a-z][a-z0-9_]*$"  # lowercase letters, digits and '_', starting with a letter
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 2_000  # a type's description, and the reason it was added
MAX_EXAMPLES = 20
MAX_EXAMPLE_CHARS = 1_000
UNCLASSIFIED = "unclassified"  # the name a proposal without a model gets; never a stored type
MAX_SCHEMA_CHARS = 100_000  # an extraction schema's JSON text
# How deep a schema's JSON, a model's JSON answer, or a pattern's groups may nest: checked before
# anything recursive (the JSON parser, the validators) reads them. Real extraction schemas nest a
# few levels; thousands end in RecursionError.
MAX_NESTING = 32
# One check of a schema, or of a model's answer against one: past it the check stops with a clear
# refusal instead of running on (a schema's ``$ref`` can fan out exponentially).
VALIDATION_SECONDS = 1.0
