"""Corpora: create, list and bind, per tenant, within the caller's reach (runtime.reach)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from knowledge_runtime.auth import Scope
from knowledge_runtime.reach import InvalidScopePath, ScopePath, access_list, allows

from knowledge_ingest.domain.documents import parse_id
from knowledge_ingest.domain.errors import (
    CorpusKeyTaken,
    CorpusNameTaken,
    CorpusNotFound,
    InvalidCorpus,
    InvalidRequest,
)
from knowledge_ingest.domain.model import Corpus, NewCorpus, Page, name_taken
from knowledge_ingest.domain.ports import CorpusKinds, CorpusRepository, ReachSource
from knowledge_ingest.domain.system_corpora import new_platform_corpus
from knowledge_ingest.guards import corpus_named, require_writable


@dataclass
class CorpusUseCases:
    corpora: CorpusRepository
    reach: ReachSource
    kinds: CorpusKinds

    async def create_corpus(
        self,
        scope: Scope,
        name: str,
        description: str,
        confidentiality: str = "",
        platform_wide: bool = False,
        key: str = "",
        default_principals: Sequence[str] = (),
    ) -> Corpus:
        """A new corpus is bound to its creator's own node, in a band the creator may read; a
        platform-wide one (domain.system_corpora decides who and which band) to no tenant. Its
        name, and its key when it has one, must be free among the corpora the creator reads at
        its node (``name_taken``). ``default_principals``: the access list its new documents get
        when their requests name none."""
        if platform_wide and key:
            raise InvalidCorpus("a platform-wide corpus takes no key", field="key")
        if platform_wide and default_principals:
            raise InvalidCorpus(
                "a platform-wide corpus takes no default_principals: every tenant reads it", field="default_principals"
            )
        defaults = access_list(default_principals, "default_principals")
        if platform_wide:
            platform = new_platform_corpus(
                name, description, confidentiality, capabilities=scope.capabilities, tenant=scope.tenant
            )
            return await self.corpora.create_platform(scope.tenant, platform)
        corpus = replace(NewCorpus.parse(name, description, confidentiality, key), default_principals=defaults)
        reader = await self.reach.reader(scope)
        if not allows(reader.clearance, corpus.confidentiality):
            raise InvalidCorpus(
                f"confidentiality {corpus.confidentiality.value} is above the token's clearance "
                f"{reader.clearance.value}; its creator could not read the corpus",
                field="confidentiality",
            )
        if name_taken(reader, reader.node, await self.corpora.bands_named(scope.tenant, reader.node, corpus.name)):
            raise CorpusNameTaken(corpus.name)
        if corpus.key is not None and name_taken(
            reader, reader.node, await self.corpora.bands_keyed(scope.tenant, reader.node, corpus.key)
        ):
            raise CorpusKeyTaken(corpus.key)
        return await self.corpora.create(scope.tenant, corpus, reader.node)

    async def keyed_or_created(self, scope: Scope, key: str, confidentiality: str = "") -> tuple[int, bool]:
        """(the corpus ``key`` names for the caller, whether it was created now): an unknown key
        is a new corpus at the caller's node, named after the key, in the band asked (TENANT
        unless given). Of two callers creating one key at once, the second finds the first's."""
        reach = await self.reach.reach_of(scope)
        found = await corpus_named(self.reach, scope, reach, "", key)
        if found is not None:
            return found, False
        try:
            return (await self.create_corpus(scope, key, "", confidentiality, key=key)).corpus_id, True
        except (CorpusKeyTaken, CorpusNameTaken):
            found = await corpus_named(self.reach, scope, await self.reach.reach_of(scope), "", key)
            if found is None:
                raise
            return found, False

    async def list_corpora(self, scope: Scope, page: Page) -> tuple[list[Corpus], int | None]:
        """One page and the id to continue after (None on the last page)."""
        reach = await self.reach.reach_of(scope)
        found = await self.corpora.list_user_corpora(
            scope.tenant, page.probe(), reach.corpus_ids, reach.reader.principals
        )
        return page.cut(found, lambda corpus: corpus.corpus_id)

    async def set_default_access(self, scope: Scope, corpus_id: str, principals: Sequence[str]) -> Corpus:
        """The corpus's default access list for its new documents; the corpus must be writable by
        the caller (out of reach: not found; an ancestor's: CorpusReadOnly). Its documents keep
        their own lists."""
        key = parse_id(corpus_id, "corpus_id")
        defaults = access_list(principals, "default_principals")
        reach = await self.reach.reach_of(scope)
        await require_writable(self.kinds, scope, reach, key, corpus_id)
        changed = await self.corpora.set_default_access(scope.tenant, key, defaults, reach.reader.principals)
        if changed is None:  # a system corpus, or gone meanwhile
            raise CorpusNotFound(corpus_id)
        return changed

    async def bind_corpus(self, scope: Scope, corpus_id: str, node_text: str) -> Corpus:
        """Bind a corpus the caller may write (bound at its node or below) to the caller's own
        node or a node below it: an ancestor's corpus is read-only to the caller, or a low token
        could take it away from every node above it."""
        key = parse_id(corpus_id, "corpus_id")
        try:
            node = ScopePath.parse(node_text)
        except InvalidScopePath as error:
            raise InvalidRequest(str(error), field="scope") from None
        reach = await self.reach.reach_of(scope)
        await require_writable(self.kinds, scope, reach, key, corpus_id)
        if not reach.reader.may_bind_to(node):
            raise InvalidRequest(
                f"scope {str(node)!r} is not the token's own node {str(reach.reader.node)!r} or below it",
                field="scope",
                reason="SCOPE_OUT_OF_REACH",
            )
        bound = await self.corpora.bind(scope.tenant, key, node, reach.reader.principals)
        if bound is None:  # a system corpus, or gone meanwhile
            raise CorpusNotFound(corpus_id)
        return bound
