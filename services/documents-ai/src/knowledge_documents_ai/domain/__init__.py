"""Pure rules of document AI: no I/O, no model, no database."""
