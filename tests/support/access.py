"""The table of access-list cases that the rule (runtime.reach.may_read_document) and its SQL
twin (document_readable, migration 0061) are both held to: one table, run through both."""

from __future__ import annotations

# (the token's sub, its groups claim, the document's access list, whether the token reads it)
CASES: list[tuple[str, list[str], list[str], bool]] = [
    ("ana", [], [], True),  # an empty list: everyone who reaches the corpus
    ("", [], [], True),  # even a token without subject or groups
    ("ana", [], ["user:ana"], True),  # named itself
    ("ana", ["hr"], ["group:hr"], True),  # through a group
    ("ana", ["hr", "it"], ["group:finance", "group:it"], True),  # through one of several groups
    ("ana", ["hr"], ["user:bob", "group:hr"], True),
    ("bob", [], ["user:ana"], False),  # another user's
    ("ana", ["finance"], ["group:hr"], False),  # another group's
    ("", [], ["user:ana"], False),  # no subject: no user principal
    ("", ["hr"], ["group:hr"], True),  # no subject, a group still counts
    ("ana", [], ["group:ana"], False),  # a user is not the group of its name
    ("hr", [], ["group:hr"], False),  # nor a group the user of its name
    ("ana", ["ana"], ["user:hr"], False),
    ("Ana", [], ["user:ana"], False),  # names compare exactly: no case folding
    ("ana ", [], ["user:ana"], False),  # nor trimming
    ("ana", [f"g{i}" for i in range(20)], [f"group:g{i}" for i in range(20, 40)], False),  # 20 groups, none listed
    ("ana", [f"g{i}" for i in range(20)], [f"group:g{i}" for i in range(19, 40)], True),  # the last one listed
    ("service:ingest", [], ["user:ana"], False),  # a service's token is no exception
]
