"""Shared pytest configuration. Integration fixtures live in tests/integration/conftest.py."""

from __future__ import annotations

import gc

import pytest


@pytest.fixture(autouse=True)
def _collect_garbage():
    """Make a leaked transport's ResourceWarning land on the test that leaked it."""
    yield
    gc.collect()
