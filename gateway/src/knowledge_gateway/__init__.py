"""Envoy configuration for the public REST API, generated from the knowledge.v1 descriptors."""
