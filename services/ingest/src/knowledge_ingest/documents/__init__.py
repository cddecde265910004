"""Documents: get, list, batch get, text pages, moves, deletion, the live list (DocumentService)."""
