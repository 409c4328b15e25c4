"""The command registry: what an ``mqadmin`` command is (upstream ``SubCommand``).

A command is one decorated coroutine in its family's module::

    @command("topicStatus", "Examine topic Status info",
             opt("-t", "--topic", required=True))
    async def topic_status(admin: MQAdmin, args: argparse.Namespace) -> Output:
        ...

``command`` records the name, the help line, the options (stock's letters and long names, in
the order ``-h`` lists them; ``BROKER_OR_CLUSTER`` is upstream's ``-b`` / ``-c`` pair) and the
coroutine in ``REGISTRY``, in definition order, which is the order ``mqadmin`` lists them;
``aliases`` registers the same command under a second name. ``cli.build_parser`` walks the
registry; every command also gets ``-n/--namesrvAddr``, ``--json`` and ``--timeout`` there.

A coroutine returns an ``Output``: ``data`` (JSON-ready, printed by ``--json``) and ``text``
(what upstream prints). It raises ``UsageError`` for bad arguments (exit 2) and lets
``RocketMQError``, ``OSError`` and timeouts propagate (``EXPECTED``: one line, exit 1).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from aiorocketmq.protocol.errors import MQClientError, RocketMQError

from ..api import MQAdmin

if TYPE_CHECKING:
    from aiorocketmq.client.producer import Producer

__all__ = [
    "BROKER_OR_CLUSTER",
    "Command",
    "EXPECTED",
    "OneOf",
    "Opt",
    "Output",
    "REGISTRY",
    "Runner",
    "UsageError",
    "broker_targets",
    "command",
    "now_ms",
    "opt",
    "parse_bool",
    "started_producer",
]

# The failures ``main`` reports as one line (exit 1), never as a traceback.
EXPECTED = (RocketMQError, OSError, asyncio.TimeoutError, UnicodeError)


@dataclass(slots=True)
class Output:
    """What a command produced: ``data`` for ``--json``, ``text`` for people."""

    data: Any
    text: str


class UsageError(MQClientError):
    """Bad command-line arguments (exit code 2)."""


Runner = Callable[[MQAdmin, argparse.Namespace], Awaitable[Output]]


class _ArgumentTarget(Protocol):
    """An ``ArgumentParser`` or one of its groups."""

    def add_argument(self, *args: Any, **kwargs: Any) -> Any: ...


@dataclass(frozen=True, slots=True)
class Opt:
    """One option: ``add_argument(*flags, **kwargs)``."""

    flags: tuple[str, ...]
    kwargs: dict[str, Any]

    def add_to(self, target: _ArgumentTarget) -> None:
        target.add_argument(*self.flags, **self.kwargs)


def opt(*flags: str, **kwargs: Any) -> Opt:
    """An option as ``argparse`` takes it: ``opt("-t", "--topic", required=True)``."""
    return Opt(flags, kwargs)


@dataclass(frozen=True, slots=True)
class OneOf:
    """Mutually exclusive options (upstream's ``-b`` or ``-c``)."""

    options: tuple[Opt, ...]
    required: bool = True

    def add_to(self, target: argparse.ArgumentParser) -> None:
        group = target.add_mutually_exclusive_group(required=self.required)
        for o in self.options:
            o.add_to(group)


BROKER_OR_CLUSTER = OneOf((opt("-b", "--brokerAddr", help="broker address"),
                           opt("-c", "--clusterName", help="cluster name")))

Option = Opt | OneOf


@dataclass(frozen=True, slots=True)
class Command:
    """One ``mqadmin`` command: its name, help line, options and coroutine."""

    name: str
    help: str
    run: Runner
    options: tuple[Option, ...] = ()
    aliases: tuple[str, ...] = ()

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        for o in self.options:
            o.add_to(parser)


# name (and alias) -> command, in registration order.
REGISTRY: dict[str, Command] = {}


def command(name: str, help_text: str, *options: Option,
            aliases: Sequence[str] = ()) -> Callable[[Runner], Runner]:
    """Register the decorated coroutine as ``mqadmin <name>``; it is returned unchanged."""

    def register(run: Runner) -> Runner:
        cmd = Command(name, help_text, run, tuple(options), tuple(aliases))
        for n in (name, *aliases):
            if n in REGISTRY:
                raise ValueError(f"mqadmin command {n} registered twice")
            REGISTRY[n] = cmd
        return run

    return register


def parse_bool(text: str) -> bool:
    """A ``true|false`` option value (case-insensitive)."""
    low = text.strip().lower()
    if low not in ("true", "false"):
        raise UsageError(f"expected true or false, got '{text}'")
    return low == "true"


async def broker_targets(admin: MQAdmin, args: argparse.Namespace) -> list[str]:
    """``-b`` the one broker, or ``-c`` the cluster's masters."""
    if getattr(args, "brokerAddr", None):
        return [args.brokerAddr]
    if getattr(args, "clusterName", None):
        return [b.addr for b in await admin.brokers(args.clusterName, masters_only=True)]
    raise UsageError("either -b brokerAddr or -c clusterName is required")


def now_ms() -> int:
    """``System.currentTimeMillis``."""
    return time.time_ns() // 1_000_000


@contextlib.asynccontextmanager
async def started_producer(admin: MQAdmin, group: str) -> AsyncIterator[Producer]:
    """A producer of ``group`` over the admin's client config (upstream's commands that
    send start a ``DefaultMQProducer``), shut down on exit."""
    from aiorocketmq.client.producer import Producer  # only the sending commands need it

    producer = Producer(group, config=admin.config,
                        send_msg_timeout_ms=max(1, int(admin.timeout * 1000)))
    await producer.start()
    try:
        yield producer
    finally:
        await producer.shutdown()
