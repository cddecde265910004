"""System corpora: who may write into which corpus, and what the prompt context leaves out.

Two kinds of system corpus exist beside a tenant's own corpora. A tenant's housekeeping corpora
(``operational_patterns``, ``user_behavior``, ``data_catalog``; ``corpora.tenant_id`` is the
tenant, ``is_system``) are written only by platform services whose token carries
``system.write``. Platform-wide corpora (``tenant_id`` NULL, ``is_system``) are written only by
a platform administrator (``platform.admin``) of the platform tenant (``reach.PLATFORM_TENANT``),
and every tenant reads them (reach.py). An ordinary token that writes into either is told the
corpus does not exist, as for another tenant's corpus: 404, never 403, so it learns nothing.
"""

from __future__ import annotations

import enum
import unicodedata

from knowledge_runtime.reach import PLATFORM_TENANT, Access, Band
from knowledge_runtime.refusals import Refusal, Refused
from knowledge_runtime.system_corpora import HOUSEKEEPING_CORPORA, PLATFORM_ADMIN, SYSTEM_WRITE, USER_BEHAVIOR

from knowledge_ingest.domain.errors import CorpusNotFound, InvalidCorpus, InvalidRequest
from knowledge_ingest.domain.model import NewCorpus

MAX_SUBJECT_CHARS = 500


class CorpusKind(enum.Enum):
    USER = "user"  # the tenant's own corpus
    HOUSEKEEPING = "housekeeping"  # the tenant's system corpus
    PLATFORM = "platform"  # a platform-wide system corpus (no tenant)


def corpus_kind(owner_tenant: str | None, is_system: bool) -> CorpusKind:
    """The kind of a corpus row the caller's tenant can see (its own, or a platform-wide one)."""
    if not is_system:
        return CorpusKind.USER
    return CorpusKind.PLATFORM if owner_tenant is None else CorpusKind.HOUSEKEEPING


def may_write(kind: CorpusKind, capabilities: frozenset[str], tenant: str) -> bool:
    """Whether a caller of ``tenant`` with ``capabilities`` may add, replace, move or delete
    documents in such a corpus. A platform-wide corpus is written only by a platform administrator
    of the platform tenant, so its rows carry the key every tenant's reads include
    (reach.PLATFORM_TENANT): another tenant's administrator would key them to its own tenant."""
    if kind is CorpusKind.USER:
        return True  # the RPC's own capability (document.upload) was already checked
    if kind is CorpusKind.HOUSEKEEPING:
        return SYSTEM_WRITE in capabilities
    return PLATFORM_ADMIN in capabilities and tenant == PLATFORM_TENANT


def write_access(reach_access: Access, kind: CorpusKind | None, capabilities: frozenset[str], tenant: str) -> Access:
    """What a caller may do when it writes into a corpus: ``reach_access`` is the scope and band
    decision (runtime.reach ``Reader.access``), ``kind`` the corpus's kind (None: no such corpus of
    the tenant's or the platform's). A system corpus the caller may not write is absent, as another
    tenant's corpus is, before the scope is asked: its existence is not the caller's to learn."""
    if reach_access is Access.ABSENT or kind is None or not may_write(kind, capabilities, tenant):
        return Access.ABSENT
    return reach_access


def new_platform_corpus(
    name: str, description: str, confidentiality: str, *, capabilities: frozenset[str], tenant: str
) -> NewCorpus:
    """A platform-wide corpus to create: only by its writers (else CAPABILITY_MISSING: creating
    names nothing that exists), GENERAL only (every tenant reads it; empty means GENERAL)."""
    if not may_write(CorpusKind.PLATFORM, capabilities, tenant):
        raise Refused(
            Refusal.CAPABILITY_MISSING,
            f"a platform-wide corpus is created only by a {PLATFORM_ADMIN!r} token of tenant {PLATFORM_TENANT!r}",
            metadata={"capability": PLATFORM_ADMIN},
        )
    corpus = NewCorpus.parse(name, description, confidentiality if confidentiality.strip() else Band.GENERAL.value)
    if corpus.confidentiality is not Band.GENERAL:
        raise InvalidCorpus(
            "a platform-wide corpus is read by every tenant: its confidentiality can only be GENERAL",
            field="confidentiality",
        )
    return corpus


def may_read(kind: CorpusKind, capabilities: frozenset[str]) -> bool:
    """Whether a caller may list or read documents of such a corpus: a housekeeping corpus holds
    entries about the tenant's users (one user's behaviour), so only its writers read it here
    (users get theirs through pre-fetch)."""
    return kind is not CorpusKind.HOUSEKEEPING or SYSTEM_WRITE in capabilities


def housekeeping_target(system_corpus: str, about_subject: str, *, capabilities: frozenset[str]) -> str:
    """The housekeeping corpus an IngestText with ``system_corpus`` writes into; what cannot be is
    refused before anything is stored. Without system.write the corpus does not exist (404)."""
    name = system_corpus.strip()
    if name not in HOUSEKEEPING_CORPORA:
        raise InvalidRequest(f"system_corpus must be one of {', '.join(HOUSEKEEPING_CORPORA)}", field="system_corpus")
    if SYSTEM_WRITE not in capabilities:
        raise CorpusNotFound(name)
    if (name == USER_BEHAVIOR) != bool(about_subject):
        raise InvalidRequest(
            f"about_subject is required for {USER_BEHAVIOR} entries and allowed for no other", field="about_subject"
        )
    if len(about_subject) > MAX_SUBJECT_CHARS or any(unicodedata.category(ch) == "Cc" for ch in about_subject):
        raise InvalidRequest(
            f"about_subject must be at most {MAX_SUBJECT_CHARS} characters without control characters",
            field="about_subject",
        )
    return name
