"""Unit tests see structlog's defaults: a service built in-process by an earlier test (its
``prepare`` configures logging, often at ``warning``) must not filter what a unit test captures."""

import pytest
import structlog


@pytest.fixture(autouse=True)
def default_logging():
    structlog.reset_defaults()
    yield
