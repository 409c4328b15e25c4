"""A thin synchronous facade over the asyncio client, for scripts and Spark executors.

Contract:

* ``LoopThread`` is one private event loop running on one daemon thread, owned by one
  object: ``open()`` (or ``__enter__``) starts the thread and then runs the ``_aopen`` hook
  on the loop; ``run(coro)`` hands a coroutine to the loop with
  ``run_coroutine_threadsafe`` and waits for its result (its exception is raised in the
  caller); ``close()`` (or ``__exit__``) runs the ``_aclose`` hook, stops the loop, cancels
  what is left on it and joins the thread. ``close`` is idempotent, and a failed ``open``
  closes before it raises. No ``asyncio.run`` per call, and the caller's thread never
  needs a loop. Not for use from inside a running event loop's thread (it would block that
  loop); use the async API there.
* ``SyncProducer``, ``SyncPullConsumer`` and ``SyncLitePullConsumer`` are ``LoopThread``
  subclasses whose hooks create and start the async object on the loop and shut it down
  there; every method is one ``run`` of the async method. ``spark_sink`` builds its
  executor and driver links on the same class.

Upstream has no such layer (Java clients are thread-based); docs/STYLE.md "Sync facade, thin".
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any, ClassVar, Self, TypeVar

from aiorocketmq.protocol.bodies import MessageQueue
from aiorocketmq.protocol.errors import MQClientError
from aiorocketmq.protocol.message import Message, MessageExt

from .api import PullResult, SendResult
from .producer import Producer
from .pull_consumer import LitePullConsumer, PullConsumer
from .selector import Selector

__all__ = ["LoopThread", "SyncProducer", "SyncPullConsumer", "SyncLitePullConsumer"]

T = TypeVar("T")


async def _await(aw: Awaitable[T]) -> T:
    return await aw


def _cancel_leftovers(loop: asyncio.AbstractEventLoop) -> None:
    # Whatever a hook left running would otherwise be destroyed pending when the loop
    # closes (asyncio.runners does the same at the end of asyncio.run).
    tasks = asyncio.all_tasks(loop)
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))


class LoopThread:
    """One event loop on one daemon thread, owned by one object (see the module docstring).

    Args:
        name: the thread's name, also used in error messages.

    Subclasses override ``_aopen`` / ``_aclose``; ``close_timeout`` bounds ``_aclose``
    (None: wait as long as it takes).
    """

    close_timeout: ClassVar[float | None] = None
    # How the loop is made; BlockingLink (spark_sink) uses uvloop's when it is installed.
    loop_factory: ClassVar[Callable[[], asyncio.AbstractEventLoop]] = asyncio.new_event_loop

    def __init__(self, name: str = "rocketmq-loop") -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def is_open(self) -> bool:
        return self._loop is not None

    def open(self) -> Self:
        """Start the loop thread, then run ``_aopen`` on it."""
        if self._thread is not None:
            raise MQClientError(f"{self._name}: already open")
        loop = type(self).loop_factory()
        ready = threading.Event()

        def main() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            try:
                loop.run_forever()
                _cancel_leftovers(loop)
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=main, name=self._name, daemon=True)
        self._thread.start()
        ready.wait()
        try:
            self.run(self._aopen())
        except BaseException:
            self.close()
            raise
        return self

    async def _aopen(self) -> None:
        """Runs on the loop at the end of ``open()``."""

    async def _aclose(self) -> None:
        """Runs on the loop at the start of ``close()``."""

    def __enter__(self) -> Self:
        return self.open()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def run(self, aw: Awaitable[T], timeout: float | None = None) -> T:
        """Run ``aw`` on the loop and wait for its result (its exception is raised here)."""
        loop = self._loop
        if loop is None:
            if isinstance(aw, Coroutine):
                aw.close()  # never awaited: close it rather than warn
            raise MQClientError(f"{self._name}: not open (use it inside 'with')")
        coro = aw if isinstance(aw, Coroutine) else _await(aw)
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)

    def submit(self, aw: Awaitable[T]) -> concurrent.futures.Future[T]:
        """Start ``aw`` on the loop and return at once: ``future.result()`` waits for it,
        ``future.cancel()`` cancels it (``run`` is ``submit(aw).result()``)."""
        loop = self._loop
        if loop is None:
            if isinstance(aw, Coroutine):
                aw.close()
            raise MQClientError(f"{self._name}: not open (use it inside 'with')")
        coro = aw if isinstance(aw, Coroutine) else _await(aw)
        return asyncio.run_coroutine_threadsafe(coro, loop)

    def close(self) -> None:
        """Run ``_aclose``, stop the loop and join its thread; idempotent."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._aclose(), loop).result(self.close_timeout)
        finally:
            self._loop = None
            self._thread = None
            loop.call_soon_threadsafe(loop.stop)
            thread.join()


class _Facade(LoopThread):
    """A ``LoopThread`` whose hooks start and shut down one async client object."""

    _async: Any = None

    def start(self) -> None:
        self.open()

    def shutdown(self) -> None:
        self.close()

    async def _aopen(self) -> None:
        await self._create_and_start()

    async def _create_and_start(self) -> None:
        raise NotImplementedError

    async def _aclose(self) -> None:
        obj, self._async = self._async, None
        if obj is not None:
            await obj.shutdown()


class SyncProducer(_Facade):
    """``Producer`` with blocking ``send`` / ``send_oneway``; same arguments."""

    def __init__(self, group: str, namesrv_addr: str | None = None, **options: Any) -> None:
        super().__init__(f"sync-producer-{group}")
        self._args = (group, namesrv_addr)
        self._options = options
        self._async: Producer | None = None

    async def _create_and_start(self) -> None:
        producer = Producer(*self._args, **self._options)
        await producer.start()
        self._async = producer

    def send(self, msg: Message | list[Message], mq: MessageQueue | None = None,
             **kw: Any) -> SendResult:
        assert self._async is not None, "use SyncProducer inside 'with'"
        return self.run(self._async.send(msg, mq, **kw))

    def send_oneway(self, msg: Message | list[Message], mq: MessageQueue | None = None,
                    **kw: Any) -> None:
        assert self._async is not None, "use SyncProducer inside 'with'"
        self.run(self._async.send_oneway(msg, mq, **kw))


class SyncPullConsumer(_Facade):
    """``PullConsumer`` with blocking calls."""

    def __init__(self, group: str, namesrv_addr: str | None = None, **options: Any) -> None:
        super().__init__(f"sync-pull-{group}")
        self._args = (group, namesrv_addr)
        self._options = options
        self._async: PullConsumer | None = None

    async def _create_and_start(self) -> None:
        consumer = PullConsumer(*self._args, **self._options)
        await consumer.start()
        self._async = consumer

    def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        assert self._async is not None
        return self.run(self._async.fetch_subscribe_message_queues(topic))

    def pull(self, mq: MessageQueue, expression: Selector, offset: int,
             max_nums: int) -> PullResult:
        assert self._async is not None
        return self.run(self._async.pull(mq, expression, offset, max_nums))

    def pull_block_if_not_found(self, mq: MessageQueue, expression: Selector, offset: int,
                                max_nums: int) -> PullResult:
        assert self._async is not None
        return self.run(self._async.pull_block_if_not_found(mq, expression, offset, max_nums))

    def get_min_offset(self, mq: MessageQueue) -> int:
        assert self._async is not None and self._async.instance is not None
        return self.run(self._async.instance.min_offset(mq))

    def get_max_offset(self, mq: MessageQueue) -> int:
        assert self._async is not None and self._async.instance is not None
        return self.run(self._async.instance.max_offset(mq))

    def fetch_consume_offset(self, mq: MessageQueue, from_store: bool = True) -> int:
        assert self._async is not None
        return self.run(self._async.fetch_consume_offset(mq, from_store))

    def update_consume_offset(self, mq: MessageQueue, offset: int) -> None:
        assert self._async is not None
        self._async.update_consume_offset(mq, offset)


class SyncLitePullConsumer(_Facade):
    """``LitePullConsumer`` with blocking ``poll`` and friends."""

    def __init__(self, group: str, namesrv_addr: str | None = None, **options: Any) -> None:
        super().__init__(f"sync-lite-pull-{group}")
        self._args = (group, namesrv_addr)
        self._options = options
        self._async: LitePullConsumer | None = None
        self._subscribe: list[tuple[str, Selector]] = []
        self._assign: list[MessageQueue] | None = None

    def subscribe(self, topic: str, expression: Selector = "*") -> None:
        """Before ``start``/``with``; a TAG expression or a ``MessageSelector``."""
        self._subscribe.append((topic, expression))

    def assign(self, mqs: Iterable[MessageQueue]) -> None:
        """Before ``start``/``with``."""
        self._assign = list(mqs)

    async def _create_and_start(self) -> None:
        c = LitePullConsumer(*self._args, **self._options)
        for topic, expr in self._subscribe:
            c.subscribe(topic, expr)
        if self._assign is not None:
            c.assign(self._assign)
        await c.start()
        self._async = c

    def poll(self, timeout: float | None = None, *,
             timeout_ms: float | None = None) -> list[MessageExt]:
        """``timeout`` in seconds or ``timeout_ms`` in milliseconds, as ``LitePullConsumer.poll``."""
        assert self._async is not None
        return self.run(self._async.poll(timeout, timeout_ms=timeout_ms))

    def seek(self, mq: MessageQueue, offset: int) -> None:
        assert self._async is not None
        self.run(self._async.seek(mq, offset))

    def commit_sync(self) -> None:
        assert self._async is not None
        self.run(self._async.commit_sync())
