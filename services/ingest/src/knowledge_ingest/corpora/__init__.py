"""Corpora: create, list, bind to a scope node, delete (CorpusService)."""
