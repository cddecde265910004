"""``knowledge search|query|context|prefetch``: what the tenant's documents say, with where."""

from __future__ import annotations

import sys
from typing import TextIO

from knowledge_cli.client import OK, Client
from knowledge_cli.rest_command import print_json


def search(client: Client, options, out: TextIO) -> int:
    answer = client.search(
        options.query, corpus_id=options.corpus, document_id=options.document, top_k=options.top_k, mode=options.mode
    )
    if options.json:
        print_json(out, answer)
        return OK
    out.write(f"relevance: {_relevance(answer.get('relevance'))}\n")
    for warning in answer.get("warnings", []):
        print(f"knowledge: {warning}", file=sys.stderr)
    for rank, hit in enumerate(answer.get("results", []), start=1):
        where = _where(hit)
        out.write(f"{rank}. {hit['filename']}{where} (document {hit['document_id']}, score {hit['fused_score']:.4f})\n")
        out.write("   " + " ".join(hit.get("content", "").split())[:300] + "\n")
    return OK


def query(client: Client, options, out: TextIO) -> int:
    answer = client.query(options.question, corpus_id=options.corpus, document_id=options.document, top_k=options.top_k)
    if options.json:
        print_json(out, answer)
        return OK
    out.write((answer.get("answer") or "(no answer: nothing relevant was found)") + "\n")
    citations = answer.get("citations", [])
    if citations:
        out.write("\n")
    for number, citation in enumerate(citations, start=1):
        out.write(f"[{number}] {citation['filename']}{_where(citation)} (document {citation['document_id']})\n")
        out.write("    " + " ".join(citation.get("excerpt", "").split())[:300] + "\n")
    print(f"knowledge: relevance {_relevance(answer.get('relevance'))}", file=sys.stderr)
    if answer.get("fallback_message"):
        print(f"knowledge: {answer['fallback_message']}", file=sys.stderr)
    return OK


def context(client: Client, options, out: TextIO) -> int:
    answer = client.context(options.query, top_k=options.top_k)
    if options.json:
        print_json(out, answer)
        return OK
    context = answer.get("context") or {}
    out.write(context.get("rendered", ""))
    for why in (context.get("metadata") or {}).get("degradations", []):
        print(f"knowledge: degraded: {why}", file=sys.stderr)
    return OK


def prefetch(client: Client, options, out: TextIO) -> int:
    answer = client.prefetch(options.message)
    if options.json:
        print_json(out, answer)
        return OK
    out.write(answer.get("rendered") or "")
    if not answer.get("rendered"):
        print("knowledge: no suggested context", file=sys.stderr)
    for why in answer.get("degradations", []):
        print(f"knowledge: degraded: {why}", file=sys.stderr)
    return OK


def _where(hit: dict) -> str:
    parts = []
    if hit.get("page"):
        parts.append(f"p. {hit['page']}")
    if hit.get("section"):
        parts.append(f"§ {hit['section']}")
    return (", " + ", ".join(parts)) if parts else ""


def _relevance(value) -> str:
    return str(value or "RELEVANCE_UNSPECIFIED").removeprefix("RELEVANCE_").lower()
