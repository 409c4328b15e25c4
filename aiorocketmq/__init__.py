"""aiorocketmq: Apache RocketMQ's nameserver, broker, clients and a Spark connector on asyncio.

The one import package of the distribution. Its parts:

- ``aiorocketmq.client``: producers, push / pull / lite-pull consumers, admin
- ``aiorocketmq.server``: the nameserver and the broker with its store
- ``aiorocketmq.protocol``: the remoting wire format (sans-IO) and the asyncio Channel
- ``aiorocketmq.spark_sink``: the Spark Structured Streaming source and sink
- ``aiorocketmq.bench``: the benchmarks behind ``mqbench``

The client's everyday names are importable from here::

    from aiorocketmq import Producer, PushConsumer, LitePullConsumer, Message

They are resolved on first use (PEP 562), so ``import aiorocketmq.server`` does not load
the client.

Logging goes through the standard ``logging`` module under the ``aiorocketmq`` logger, which
has a ``NullHandler``: silent until the application configures logging (see
``aiorocketmq.logs``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "Producer",
    "TransactionProducer",
    "RequestProducer",
    "PushConsumer",
    "PullConsumer",
    "LitePullConsumer",
    "Message",
    "MessageExt",
    "MessageQueue",
    "SendResult",
    "SendStatus",
    "ConsumeConcurrentlyStatus",
    "ConsumeOrderlyStatus",
    "ClientConfig",
]

if TYPE_CHECKING:
    from aiorocketmq.client import (
        ClientConfig,
        ConsumeConcurrentlyStatus,
        ConsumeOrderlyStatus,
        LitePullConsumer,
        Message,
        MessageExt,
        MessageQueue,
        Producer,
        PullConsumer,
        PushConsumer,
        RequestProducer,
        SendResult,
        SendStatus,
        TransactionProducer,
    )


def __getattr__(name: str) -> Any:
    if name in __all__:
        from aiorocketmq import client

        value = getattr(client, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'aiorocketmq' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
