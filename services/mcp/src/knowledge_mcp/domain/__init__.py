"""What the adapter decides without touching the wire: the result contract and its hints."""
