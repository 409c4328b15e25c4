"""Fixtures shared by the loopback channel tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from aiorocketmq.protocol.channel import Channel
from aiorocketmq.protocol.remoting_server import RemotingServer


@pytest.fixture
async def channel(server: RemotingServer) -> AsyncIterator[Channel]:
    """A client Channel to the ``server`` fixture of the requesting test module."""
    ch = await Channel.connect("127.0.0.1", server.port, timeout=5)
    try:
        yield ch
    finally:
        ch.close()
        await ch.wait_closed()
