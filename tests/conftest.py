"""Shared pytest configuration. Integration fixtures live in tests/integration/conftest.py."""

from __future__ import annotations

import gc
import subprocess

import pytest

# Children are spawned with fork + exec, not vfork: with threads of the test process running
# (event loops, flows driving stock clients), a vforked child's execve of /usr/bin/java once
# failed with EFAULT ("[Errno 14] Bad address") in a CI rehearsal, though every spawn holds
# tests.procs.SPAWN_LOCK. The knob is the one the subprocess docs give for this.
subprocess._USE_VFORK = False  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def _collect_garbage():
    """Make a leaked transport's ResourceWarning land on the test that leaked it."""
    yield
    gc.collect()
