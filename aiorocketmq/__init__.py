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

The compiled parts (setup.py) are optional speed-ups of Python code that stays the
reference. ``AIOROCKETMQ_NO_EXTENSIONS=1`` in the environment (any value but empty or
``0``; read once, when ``aiorocketmq`` is first imported) makes every module use its Python
path although the C one is built, as aiokafka's ``AIOKAFKA_NO_EXTENSIONS``:
``NO_EXTENSIONS`` says which, and ``refuse_extension`` is the one check every optional
import goes through.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

logging.getLogger(__name__).addHandler(logging.NullHandler())

#: ``AIOROCKETMQ_NO_EXTENSIONS`` is set: the pure-Python paths run, built C modules unused.
NO_EXTENSIONS = os.environ.get("AIOROCKETMQ_NO_EXTENSIONS", "") not in ("", "0")


def refuse_extension(module: str) -> None:
    """Raise ``ImportError`` for the C module ``module`` when ``NO_EXTENSIONS`` is set.

    Called first inside the ``try`` of every optional import of a compiled module, so the
    ``except ImportError`` fallback that serves a build without a C compiler also serves
    the switch::

        try:
            refuse_extension("aiorocketmq.protocol._message")
            from ._message import decode_records
        except ImportError:
            decode_records = None
    """
    if NO_EXTENSIONS:
        raise ImportError(f"{module} not loaded: AIOROCKETMQ_NO_EXTENSIONS is set", name=module)

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
