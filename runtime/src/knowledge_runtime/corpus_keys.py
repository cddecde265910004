"""A corpus's caller-chosen key (``projects/42/production``) and which corpus a key names.

A key is the platform's name for a collection: a platform service indexes into its project's
and environment's key and never learns the service's corpus id. Keys are unique where names are
(per scope node and band, migration 0055's rule): a key held where the caller cannot read it
does not exist for it, so two corpora may bear one key in different parts of the tree. A key
therefore names, for a reader, the corpus it reads that bears the key and is bound nearest to
its own node (its node first, then each ancestor up to the root); of two at one node (another
band, created by a reader of a lower clearance), the older. Both services that take a key
(ingest, search) resolve it with :func:`resolve`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from knowledge_runtime.reach import Placement, Reach

MAX_KEY_CHARS = 200
# Letters, digits and . _ : / - ; it begins with a letter or digit (a path of the caller's, not a URL).
CORPUS_KEY_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,199}$"
_KEY = re.compile(CORPUS_KEY_PATTERN)
# In a REST path that names its corpus ({corpus_id}), "-" stands for "named by corpus_key" (AIP-159).
BY_KEY = "-"


class InvalidCorpusKey(ValueError):
    pass


def check_key(text: str) -> str:
    """The key as given, or InvalidCorpusKey saying what a key is."""
    if not _KEY.match(text):
        raise InvalidCorpusKey(
            f"corpus_key {text[:60]!r} must be 1 to {MAX_KEY_CHARS} letters, digits, '.', '_', ':', '/' or '-', "
            "beginning with a letter or digit"
        )
    return text


def resolve(reach: Reach, keyed: Iterable[Placement]) -> int | None:
    """The corpus ``keyed`` (the corpora bearing a key) names for this reach's reader: among those
    it reaches, the one bound nearest its node, the oldest among equals; None when it reaches none."""
    depth = {node: index for index, node in enumerate(reversed(reach.reader.node.lineage()))}
    candidates = [p for p in keyed if reach.has(p.corpus_id) and p.node in depth]
    if not candidates:
        return None
    return min(candidates, key=lambda p: (depth[p.node], p.corpus_id)).corpus_id
