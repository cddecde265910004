"""The events outbox: written with each change, numbered by the relay, watched from a cursor (EventService)."""
