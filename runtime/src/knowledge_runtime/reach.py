"""What a caller may read inside its tenant: the scope hierarchy and the confidentiality bands.

The rules, each decided here and nowhere else:

- **Scope nodes.** A tenant holds a hierarchy: the root ``/``, ``workspace:X``,
  ``workspace:X/project:Y`` and ``workspace:X/project:Y/mission:Z``. A corpus is bound to exactly
  one node. A caller (its node comes only from the verified token's ``scope`` claim) reads the
  corpora bound to its node and to each ancestor up to the root, never a sibling's or a
  descendant's. The root always exists; any other node exists once a corpus has been bound to it
  or to a node below it (``BindCorpus`` creates the node and its ancestors). A token without a
  ``scope`` claim, or naming a node the tenant does not have, is unresolved and reads nothing:
  ``Refused(SCOPE_UNRESOLVED)``, never a wildcard and never the root.
- **Confidentiality.** A corpus carries a band; a token's ``clearance`` claim names the highest
  band it may read (TENANT when absent). :func:`allows` decides from :data:`READABLE`, a table of
  what each clearance means, never from the order of the bands' numbers.
- **Writing.** Reading a corpus never grants writing it. :meth:`Reader.access` decides: a corpus
  out of reach is :attr:`Access.ABSENT` (404, as if it did not exist); one in reach but bound above
  the caller's node (an ancestor's) is :attr:`Access.READ_ONLY` (403: the caller reads it, so
  saying so leaks nothing); only one bound at the caller's node or below is :attr:`Access.WRITABLE`.
  Otherwise a token low in the hierarchy could bind, delete or fill a corpus every node above and
  beside it reads.

- **Access lists.** Inside a corpus, a document may carry a list of the principals who may read
  it (``user:<sub>``, ``group:<name>``); an empty list means everyone who reaches the corpus.
  :func:`may_read_document` decides, the third condition beside scope and band: the caller's
  principals (:func:`principals_of`: its verified token's ``sub`` and ``groups``, never a request
  field) must meet the list. The SQL twin, ``document_readable(listed, caller)`` (migration
  0062), is the same rule applied inside every query that reads documents; a test runs one
  table of cases through both. A document the caller may not read is absent (404), as a
  corpus out of reach is.

- **Platform-wide corpora.** Beside a tenant's own corpora, every tenant sees the platform-wide
  ones (``corpora.tenant_id`` NULL, ``is_system``; GENERAL band only, bound to the root). Their
  documents are written only by a platform administrator of :data:`PLATFORM_TENANT`, so their
  rows (documents, chunks, postings) are keyed by that tenant; :meth:`Reach.owners` names the
  tenant keys a read of this reach may touch, and a reach holding platform material always filters
  on its corpus ids (the platform tenant's other corpora are never read through it).

``ScopePath`` is a node of the hierarchy; the verified caller is ``auth.Scope`` (tenant,
capabilities, subject and groups, and its node and clearance).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from enum import StrEnum

from knowledge_runtime.errors import InvalidField
from knowledge_runtime.refusals import Refusal, Refused

ROOT = "/"
# The tenant whose platform administrators write the platform-wide corpora; their documents,
# chunks and postings carry it as their tenant key (docs/operations.md, "Platform-wide corpora").
PLATFORM_TENANT = "platform"
# The levels of the hierarchy, outermost first; a path names them in this order, none skipped.
LEVELS = ("workspace", "project", "mission")
# A node's name: letters, digits and . _ - (no ":" or "/", which structure the path).
_NAME = r"[A-Za-z0-9._-]{1,100}"
# The whole grammar of a scope path, one leading and one trailing "/" allowed; the served OpenAPI
# states the same pattern, so what the description allows is exactly what parses.
SCOPE_PATH_PATTERN = f"^(/|/?workspace:{_NAME}(/project:{_NAME}(/mission:{_NAME})?)?/?)$"
_PATH = re.compile(SCOPE_PATH_PATTERN)


class Access(StrEnum):
    """What a caller may do with a corpus (:meth:`Reader.access`)."""

    ABSENT = "ABSENT"  # out of reach: not found, as if it did not exist
    READ_ONLY = "READ_ONLY"  # in reach, bound above the caller's node: read, never written
    WRITABLE = "WRITABLE"  # in reach and bound at the caller's node or below


class InvalidScopePath(ValueError):
    """The text is not a scope path (the caller decides whether that is bad input or unresolved)."""


@dataclass(frozen=True, slots=True, order=True)
class ScopePath:
    """A node of a tenant's scope hierarchy: ``()`` is the root, else (level, name) pairs."""

    parts: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, text: str) -> ScopePath:
        """``/`` or ``workspace:eng``, ``workspace:eng/project:billing``, ...; one leading and one
        trailing slash are allowed (``/workspace:eng/``). Anything else raises InvalidScopePath."""
        if not isinstance(text, str) or not _PATH.match(text):
            shown = text[:60] if isinstance(text, str) else type(text).__name__
            raise InvalidScopePath(
                f"{shown!r} is not a scope path: '/' (the tenant root), 'workspace:NAME', "
                "'workspace:NAME/project:NAME' or 'workspace:NAME/project:NAME/mission:NAME' "
                "(NAME of letters, digits, '.', '_', '-')"
            )
        segments = [s for s in text.strip("/").split("/") if s]
        return cls(tuple((level, name) for level, _, name in (s.partition(":") for s in segments)))

    def __str__(self) -> str:
        return "/".join(f"{level}:{name}" for level, name in self.parts) or ROOT

    @property
    def is_root(self) -> bool:
        return not self.parts

    def lineage(self) -> tuple[ScopePath, ...]:
        """This node and each ancestor up to the root, the root first."""
        return tuple(ScopePath(self.parts[:n]) for n in range(len(self.parts) + 1))

    def is_within(self, other: ScopePath) -> bool:
        """This node is ``other`` or below it."""
        return self.parts[: len(other.parts)] == other.parts


TENANT_ROOT = ScopePath()


class Band(StrEnum):
    """Confidentiality of a corpus, named as the proto enum ``Confidentiality`` carries it."""

    GENERAL = "GENERAL"  # may be shared beyond the tenant
    TENANT = "TENANT"  # the organisation's own material (the default)
    CONFIDENTIAL = "CONFIDENTIAL"
    RESTRICTED = "RESTRICTED"


DEFAULT_BAND = Band.TENANT
DEFAULT_CLEARANCE = Band.TENANT  # a token without a clearance claim

# What each clearance may read: the meaning, written out. A GENERAL reader (a context shared
# beyond the tenant) reads only GENERAL material, whatever number TENANT has in any enum.
READABLE: Mapping[Band, frozenset[Band]] = {
    Band.GENERAL: frozenset({Band.GENERAL}),
    Band.TENANT: frozenset({Band.GENERAL, Band.TENANT}),
    Band.CONFIDENTIAL: frozenset({Band.GENERAL, Band.TENANT, Band.CONFIDENTIAL}),
    Band.RESTRICTED: frozenset({Band.GENERAL, Band.TENANT, Band.CONFIDENTIAL, Band.RESTRICTED}),
}


def allows(clearance: Band, band: Band) -> bool:
    """Whether a reader of this clearance may read material of this band."""
    return band in READABLE[clearance]


def parse_band(text: str) -> Band:
    """A band by its exact name (``CONFIDENTIAL``); ValueError naming the known ones."""
    try:
        return Band(text)
    except ValueError:
        raise ValueError(f"unknown confidentiality {text!r}; one of {', '.join(b.value for b in Band)}") from None


# ---- access lists: who may read a document inside a corpus ----

USER_PREFIX = "user:"
GROUP_PREFIX = "group:"
MAX_PRINCIPALS = 100  # entries in one document's (or a corpus's default) access list
MAX_PRINCIPAL_CHARS = 200  # one entry, its prefix included
# A principal: "user:" or "group:" and a name of at least one character, no control character
# (the name is the identity provider's, compared exactly: no case folding, no trimming).
PRINCIPAL_PATTERN = r"^(user|group):[^\x00-\x1f\x7f-\x9f]+$"
_PRINCIPAL = re.compile(PRINCIPAL_PATTERN)


class AccessListInvalid(InvalidField):
    """An access list that is not one (INVALID_ARGUMENT, reason ACCESS_LIST_INVALID), naming the
    field and the entry at fault."""

    reason = "ACCESS_LIST_INVALID"

    def __init__(self, field: str, message: str, principal: str = "") -> None:
        extra = {"principal": principal[:80]} if principal else {}
        super().__init__(field, message, **extra)


def principals_of(subject: str, groups: Iterable[str]) -> frozenset[str]:
    """The principals a verified token speaks for: ``user:<sub>`` (when it has a subject) and
    ``group:<name>`` for each of its groups."""
    found = {f"{GROUP_PREFIX}{g}" for g in groups if g}
    if subject:
        found.add(f"{USER_PREFIX}{subject}")
    return frozenset(found)


def may_read_document(principals: AbstractSet[str], listed: Collection[str]) -> bool:
    """THE access-list rule: a document whose list is empty is read by everyone who reaches its
    corpus; one with a list only by a caller the list names, itself (``user:<sub>``) or through
    one of its groups (``group:<name>``). Scope and band are decided before (:meth:`Reader.may_read`);
    this never widens them."""
    return not listed or not principals.isdisjoint(listed)


def access_list(entries: Iterable[str], field: str) -> tuple[str, ...]:
    """A list as stored: each entry checked (``user:<name>`` or ``group:<name>``), duplicates
    dropped, sorted (so two spellings of one list compare equal); AccessListInvalid naming the
    first entry at fault. The limit counts the entries as sent, duplicates too: the REST
    description's ``maxItems`` says so, and a request is judged by what it carries."""
    given = list(entries)
    if len(given) > MAX_PRINCIPALS:
        raise AccessListInvalid(field, f"{field} names at most {MAX_PRINCIPALS} principals, not {len(given)}")
    checked: set[str] = set()
    for entry in given:
        if not isinstance(entry, str) or len(entry) > MAX_PRINCIPAL_CHARS or not _PRINCIPAL.fullmatch(entry):
            shown = entry if isinstance(entry, str) else type(entry).__name__
            raise AccessListInvalid(
                field,
                f"{field} entry {shown[:60]!r} is not a principal: 'user:<subject>' or 'group:<name>', "
                f"at most {MAX_PRINCIPAL_CHARS} characters, no control characters",
                shown,
            )
        checked.add(entry)
    return tuple(sorted(checked))


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a corpus sits: its node and its band."""

    corpus_id: int
    node: ScopePath
    band: Band
    platform: bool = False  # a platform-wide corpus (no tenant): its rows carry PLATFORM_TENANT


@dataclass(frozen=True, slots=True)
class Reader:
    """A resolved caller: the node it reads from, its clearance, and the principals it speaks for
    (none: it reads only the documents whose access list is empty)."""

    node: ScopePath
    clearance: Band = DEFAULT_CLEARANCE
    principals: frozenset[str] = frozenset()

    def may_read_document(self, listed: Collection[str]) -> bool:
        """:func:`may_read_document` for this reader (its corpus is decided by :meth:`may_read`)."""
        return may_read_document(self.principals, listed)

    def may_read(self, node: ScopePath, band: Band) -> bool:
        """THE reach decision: material bound to ``node`` with ``band`` is visible to this reader
        when ``node`` is the reader's node or an ancestor of it, and the clearance allows the band."""
        return self.node.is_within(node) and allows(self.clearance, band)

    def access(self, node: ScopePath, band: Band) -> Access:
        """THE write decision for material bound to ``node`` with ``band``: absent unless this
        reader may read it; writable only when ``node`` is the reader's own node or below it
        (what the reader reads from an ancestor's node is read-only to it)."""
        if not self.may_read(node, band):
            return Access.ABSENT
        return Access.WRITABLE if node.is_within(self.node) else Access.READ_ONLY

    def may_bind_to(self, node: ScopePath) -> bool:
        """A corpus may be bound only to the reader's own node or below it."""
        return node.is_within(self.node)


@dataclass(frozen=True, slots=True)
class Reach:
    """What one request may read: the reader and the corpora it reaches (computed once)."""

    reader: Reader
    corpus_ids: frozenset[int]
    # True when every corpus the tenant can see at all is reachable, so a query need not filter.
    everything: bool = False
    # True when a platform-wide corpus is among corpus_ids (then ``everything`` is never set).
    platform: bool = False
    # Where each reachable corpus sits (what :meth:`access` judges by).
    placements: Mapping[int, Placement] = field(default_factory=dict)

    def has(self, corpus_id: int | None) -> bool:
        return corpus_id is not None and corpus_id in self.corpus_ids

    def access(self, corpus_id: int) -> Access:
        """:meth:`Reader.access` for a corpus by id: ABSENT when it is not in this reach."""
        placement = self.placements.get(corpus_id) if self.has(corpus_id) else None
        if placement is None:
            return Access.ABSENT
        return self.reader.access(placement.node, placement.band)

    @property
    def writable(self) -> frozenset[int]:
        """The reachable corpora this reader may write (bound at its node or below)."""
        return frozenset(c for c in self.corpus_ids if self.access(c) is Access.WRITABLE)

    def owners(self, tenant: str) -> tuple[str, ...]:
        """The tenant keys of the rows this reach may read: the caller's own, and the platform
        tenant's when a platform-wide corpus is reached (its rows are read only within
        ``corpus_ids``: ``everything`` is false then)."""
        if self.platform and tenant != PLATFORM_TENANT:
            return (tenant, PLATFORM_TENANT)
        return (tenant,)


def claimed_node(claim: str | None) -> ScopePath:
    """The node a token's ``scope`` claim names, or Refused(SCOPE_UNRESOLVED): no claim, or a
    claim that is no scope path. Whether the tenant has that node is :func:`resolve`'s question."""
    if claim is None:
        raise Refused(
            Refusal.SCOPE_UNRESOLVED,
            "the token carries no scope claim, so nothing can be read; "
            "its issuer must name a scope node, e.g. '/' for the tenant root",
        )
    try:
        return ScopePath.parse(claim)
    except InvalidScopePath as error:
        raise Refused(
            Refusal.SCOPE_UNRESOLVED, f"the token's scope claim is not a scope path ({error}); nothing can be read"
        ) from None


def resolve(
    tenant: str,
    claim: str | None,
    clearance: Band,
    known: Iterable[ScopePath],
    principals: frozenset[str] = frozenset(),
) -> Reader:
    """The reader a token's ``scope`` claim resolves to, or Refused(SCOPE_UNRESOLVED): no claim,
    a claim that is no scope path, or a node the tenant does not have (the root always exists).
    Never a wildcard, never a fallback to the root. ``principals``: the token's (:func:`principals_of`)."""
    node = claimed_node(claim)
    if not node.is_root and node not in set(known):
        raise Refused(
            Refusal.SCOPE_UNRESOLVED,
            f"the token's scope {str(node)!r} is not a scope node of tenant {tenant!r}; nothing can be read",
            metadata={"scope": str(node)},
        )
    return Reader(node=node, clearance=clearance, principals=principals)


def reach(reader: Reader, placements: Iterable[Placement]) -> Reach:
    """The corpora ``reader`` may read among ``placements`` (every corpus the tenant can see)."""
    listed = list(placements)
    readable = [p for p in listed if reader.may_read(p.node, p.band)]
    ids = frozenset(p.corpus_id for p in readable)
    platform = any(p.platform for p in readable)
    return Reach(
        reader=reader,
        corpus_ids=ids,
        everything=len(ids) == len(listed) and not platform,
        platform=platform,
        placements={p.corpus_id: p for p in readable},
    )
