"""A thin synchronous facade over the asyncio client, for scripts and Spark executors.

Each facade object owns one private event loop running on one daemon thread, started in
``__enter__`` (or ``start()``) and stopped in ``__exit__`` (``shutdown()``): the async
object is created, started, used and shut down on that loop, and every method hands a
coroutine to it with ``run_coroutine_threadsafe`` and waits for the result. No
``asyncio.run`` per call, and the caller's thread never needs a loop. Not for use from
inside a running event loop's thread (it would block that loop); use the async API there.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterable
from typing import Any, TypeVar

from protocol.bodies import MessageQueue
from protocol.errors import MQClientError
from protocol.message import Message, MessageExt

from .api import PullResult, SendResult
from .producer import Producer
from .pull_consumer import LitePullConsumer, PullConsumer

__all__ = ["SyncProducer", "SyncPullConsumer", "SyncLitePullConsumer"]

T = TypeVar("T")


class _LoopThread:
    """One event loop on one thread, owned by one facade object."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            raise MQClientError(f"{self._name}: already started")
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=run, name=self._name, daemon=True)
        self._thread.start()
        ready.wait()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        loop = self._loop
        if loop is None or loop.is_closed():
            coro.close()
            raise MQClientError(f"{self._name}: not started (use it inside 'with')")
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        self._loop = None
        self._thread = None


class _Facade:
    _async: Any

    def __init__(self, name: str) -> None:
        self._lt = _LoopThread(name)

    def start(self) -> None:
        self._lt.start()
        try:
            self._lt.run(self._create_and_start())
        except BaseException:
            self._lt.stop()
            raise

    async def _create_and_start(self) -> None:
        raise NotImplementedError

    def shutdown(self) -> None:
        try:
            if getattr(self, "_async", None) is not None:
                self._lt.run(self._async.shutdown())
        finally:
            self._lt.stop()

    def __enter__(self) -> Any:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()


class SyncProducer(_Facade):
    """``Producer`` with blocking ``send`` / ``send_oneway``; same arguments."""

    def __init__(self, group: str, namesrv_addr: str | None = None, **options: Any) -> None:
        super().__init__(f"sync-producer-{group}")
        self._args = (group, namesrv_addr)
        self._options = options
        self._async: Producer | None = None

    async def _create_and_start(self) -> None:
        self._async = Producer(*self._args, **self._options)
        await self._async.start()

    def send(self, msg: Message | list[Message], mq: MessageQueue | None = None,
             **kw: Any) -> SendResult:
        assert self._async is not None, "use SyncProducer inside 'with'"
        return self._lt.run(self._async.send(msg, mq, **kw))

    def send_oneway(self, msg: Message | list[Message], mq: MessageQueue | None = None,
                    **kw: Any) -> None:
        assert self._async is not None, "use SyncProducer inside 'with'"
        self._lt.run(self._async.send_oneway(msg, mq, **kw))


class SyncPullConsumer(_Facade):
    """``PullConsumer`` with blocking calls."""

    def __init__(self, group: str, namesrv_addr: str | None = None, **options: Any) -> None:
        super().__init__(f"sync-pull-{group}")
        self._args = (group, namesrv_addr)
        self._options = options
        self._async: PullConsumer | None = None

    async def _create_and_start(self) -> None:
        self._async = PullConsumer(*self._args, **self._options)
        await self._async.start()

    def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        assert self._async is not None
        return self._lt.run(self._async.fetch_subscribe_message_queues(topic))

    def pull(self, mq: MessageQueue, expression: str | None, offset: int,
             max_nums: int) -> PullResult:
        assert self._async is not None
        return self._lt.run(self._async.pull(mq, expression, offset, max_nums))

    def pull_block_if_not_found(self, mq: MessageQueue, expression: str | None, offset: int,
                                max_nums: int) -> PullResult:
        assert self._async is not None
        return self._lt.run(self._async.pull_block_if_not_found(mq, expression, offset, max_nums))

    def get_min_offset(self, mq: MessageQueue) -> int:
        assert self._async is not None and self._async.instance is not None
        return self._lt.run(self._async.instance.min_offset(mq))

    def get_max_offset(self, mq: MessageQueue) -> int:
        assert self._async is not None and self._async.instance is not None
        return self._lt.run(self._async.instance.max_offset(mq))

    def fetch_consume_offset(self, mq: MessageQueue, from_store: bool = True) -> int:
        assert self._async is not None
        return self._lt.run(self._async.fetch_consume_offset(mq, from_store))

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
        self._subscribe: list[tuple[str, str | None]] = []
        self._assign: list[MessageQueue] | None = None

    def subscribe(self, topic: str, expression: str | None = "*") -> None:
        """Before ``start``/``with``."""
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
        self._async = c
        await c.start()

    def poll(self, timeout: float | None = None) -> list[MessageExt]:
        assert self._async is not None
        return self._lt.run(self._async.poll(timeout))

    def seek(self, mq: MessageQueue, offset: int) -> None:
        assert self._async is not None
        self._lt.run(self._async.seek(mq, offset))

    def commit_sync(self) -> None:
        assert self._async is not None
        self._lt.run(self._async.commit_sync())
