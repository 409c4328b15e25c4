"""Consumer offset stores: where a consumer group's progress per queue is kept.

Upstream ``consumer.store.{OffsetStore,RemoteBrokerOffsetStore,LocalFileOffsetStore}``
(docs/PROTOCOL.md 4.5, 8):

* ``RemoteBrokerOffsetStore`` (clustering): offsets live in memory and are pushed to the
  master of each queue's broker with UPDATE_CONSUMER_OFFSET, **oneway**, from the periodic
  persist task (``persist_all``) and when a queue is dropped (``persist``). ``read_offset``
  with ``READ_FROM_STORE`` asks the broker (QUERY_CONSUMER_OFFSET): a broker error code
  (no offset stored) gives ``-1``, any other failure ``-2``, as upstream.
* ``LocalFileOffsetStore`` (broadcasting): the same table persisted to
  ``<dir>/<clientId>/<group>/offsets.json`` in upstream's ``OffsetSerializeWrapper``
  layout ``{"offsetTable":{{"brokerName":..,"queueId":..,"topic":..}:offset}}`` (fastjson
  object keys), written atomically (temp file, fsync, rename, previous copy kept as
  ``.bak``, which ``load`` falls back to), one write at a time in call order, each to its
  end even when its caller is cancelled (``atomic_file.AtomicFileWriter``). ``dir``
  defaults to ``~/.rocketmq_offsets`` (upstream ``rocketmq.client.localOffsetStoreDir``;
  our env var ``ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR``). We write the compact form, not
  fastjson's pretty one; both readers accept either.

``update_offset(mq, offset, increase_only=True)`` never moves an offset backwards; with
``increase_only=False`` it sets it (offset resets, OFFSET_ILLEGAL).
"""

from __future__ import annotations

import asyncio
import enum
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol import fastjson
from aiorocketmq.protocol.atomic_file import AtomicFileWriter, remove_stale_temp_files
from aiorocketmq.protocol.bodies import MessageQueue
from aiorocketmq.protocol.errors import MQBrokerError, MQClientError, ProtocolError

__all__ = [
    "ReadOffsetType",
    "OffsetBackend",
    "OffsetStore",
    "RemoteBrokerOffsetStore",
    "LocalFileOffsetStore",
    "default_local_offset_dir",
]

log = get_logger("aiorocketmq.client.offset_store")


class ReadOffsetType(enum.Enum):
    READ_FROM_MEMORY = 0
    READ_FROM_STORE = 1
    MEMORY_FIRST_THEN_STORE = 2


class OffsetBackend(Protocol):
    """How the remote store talks to brokers (implemented by the client instance)."""

    async def fetch_consume_offset(self, group: str, mq: MessageQueue) -> int:
        """QUERY_CONSUMER_OFFSET; raises ``MQBrokerError`` when the broker has none."""
        ...

    async def update_consume_offset(self, group: str, mq: MessageQueue, offset: int, *,
                                    oneway: bool) -> None:
        """UPDATE_CONSUMER_OFFSET to the queue's master."""
        ...


class OffsetStore:
    """The in-memory table both stores share (upstream's two copies of it, once)."""

    def __init__(self, group: str) -> None:
        self.group = group
        self._table: dict[MessageQueue, int] = {}

    async def load(self) -> None:
        """Read persisted offsets (nothing to do for the remote store)."""

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool = True) -> None:
        old = self._table.get(mq)
        if old is None or not increase_only or offset > old:
            self._table[mq] = offset

    def remove_offset(self, mq: MessageQueue) -> None:
        self._table.pop(mq, None)

    def clone_offset_table(self, topic: str | None = None) -> dict[MessageQueue, int]:
        return {mq: off for mq, off in self._table.items() if not topic or mq.topic == topic}

    def _read_memory(self, mq: MessageQueue) -> int | None:
        return self._table.get(mq)

    async def read_offset(self, mq: MessageQueue, type_: ReadOffsetType) -> int:
        """The stored offset; ``-1`` when there is none, ``-2`` when the lookup failed."""
        if type_ is not ReadOffsetType.READ_FROM_STORE:
            off = self._table.get(mq)
            if off is not None:
                return off
            if type_ is ReadOffsetType.READ_FROM_MEMORY:
                return -1
        return await self._read_from_store(mq)

    async def _read_from_store(self, mq: MessageQueue) -> int:
        return -1

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        """Persist the offsets of ``mqs`` (the queues this consumer still holds)."""

    async def persist(self, mq: MessageQueue) -> None:
        """Persist one queue's offset (it is being dropped)."""

    async def update_consume_offset_to_broker(self, mq: MessageQueue, offset: int,
                                              oneway: bool = True) -> None:
        """Push one offset to the broker now (lite-pull ``commit_sync``); local stores ignore it."""


class RemoteBrokerOffsetStore(OffsetStore):
    """Clustering consumers: offsets kept by the brokers (see module docstring)."""

    def __init__(self, group: str, backend: OffsetBackend) -> None:
        super().__init__(group)
        self._backend = backend

    async def _read_from_store(self, mq: MessageQueue) -> int:
        try:
            off = await self._backend.fetch_consume_offset(self.group, mq)
        except MQBrokerError:
            return -1  # no offset in broker
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("client.offset_store.fetch_failed", group=self.group, mq=str(mq), error=str(exc))
            return -2
        self.update_offset(mq, off, increase_only=False)
        return off

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        keep = set(mqs)
        if not keep:
            return
        unused = []
        for mq, off in list(self._table.items()):
            if mq in keep:
                try:
                    await self._backend.update_consume_offset(self.group, mq, off, oneway=True)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.warning("client.offset_store.persist_failed", group=self.group, mq=str(mq),
                                offset=off, error=str(exc))
            else:
                unused.append(mq)
        for mq in unused:
            self._table.pop(mq, None)

    async def persist(self, mq: MessageQueue) -> None:
        off = self._table.get(mq)
        if off is None:
            return
        try:
            await self._backend.update_consume_offset(self.group, mq, off, oneway=True)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("client.offset_store.persist_failed", group=self.group, mq=str(mq), offset=off,
                        error=str(exc))

    async def update_consume_offset_to_broker(self, mq: MessageQueue, offset: int,
                                              oneway: bool = True) -> None:
        await self._backend.update_consume_offset(self.group, mq, offset, oneway=oneway)


def default_local_offset_dir() -> Path:
    env = os.environ.get("ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR")
    return Path(env) if env else Path.home() / ".rocketmq_offsets"


class LocalFileOffsetStore(OffsetStore):
    """Broadcasting consumers: offsets in a local JSON file (see module docstring).

    File I/O runs in a worker thread so the loop never waits on fsync.
    """

    def __init__(self, group: str, client_id: str, base_dir: Path | str | None = None) -> None:
        super().__init__(group)
        base = Path(base_dir) if base_dir is not None else default_local_offset_dir()
        self.path = base / client_id / group / "offsets.json"
        self._writer = AtomicFileWriter(self.path, backup=True)

    @staticmethod
    def _decode(data: bytes) -> dict[MessageQueue, int]:
        obj = fastjson.loads(data)
        if not isinstance(obj, dict):
            raise ProtocolError("offsets file is not a JSON object")
        table = obj.get("offsetTable") or {}
        if not isinstance(table, dict):
            raise ProtocolError("offsetTable is not a JSON object")
        out: dict[MessageQueue, int] = {}
        for key, value in table.items():
            if isinstance(key, str):
                key = fastjson.loads(key)
            out[MessageQueue.from_json(key)] = int(value)
        return out

    def _read_file(self) -> dict[MessageQueue, int]:
        for candidate in (self.path, self.path.with_name(self.path.name + ".bak")):
            try:
                data = candidate.read_bytes()
            except FileNotFoundError:
                continue
            if not data.strip():
                continue
            try:
                return self._decode(data)
            except (ProtocolError, ValueError, TypeError) as exc:
                log.warning("client.offset_store.bad_file", path=str(candidate), error=str(exc))
        return {}

    def _load_file(self) -> dict[MessageQueue, int]:
        remove_stale_temp_files(self.path)
        return self._read_file()

    async def load(self) -> None:
        """Read the file (or its ``.bak``); a file that exists but does not parse raises.

        Raises:
            MQClientError: neither the file nor its backup could be read.
        """
        try:
            table = await asyncio.to_thread(self._load_file)
        except OSError as exc:
            raise MQClientError(f"cannot read local offsets {self.path}: {exc}") from exc
        self._table.update(table)
        for mq, off in table.items():
            log.info("client.offset_store.loaded", group=self.group, mq=str(mq), offset=off)

    def _encode(self, table: dict[MessageQueue, int]) -> bytes:
        return fastjson.dumps({"offsetTable": {mq.to_object_key(): off
                                               for mq, off in table.items()}})

    async def _read_from_store(self, mq: MessageQueue) -> int:
        try:
            table = await asyncio.to_thread(self._read_file)
        except OSError:
            return -1
        off = table.get(mq)
        if off is None:
            return -1
        self.update_offset(mq, off, increase_only=False)
        return off

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        keep = set(mqs)
        if not keep:
            return

        def encode() -> bytes:  # the offsets as they are when this write's turn comes
            return self._encode({mq: off for mq, off in self._table.items() if mq in keep})

        await self._writer.write(encode)

    async def persist(self, mq: MessageQueue) -> None:
        """Upstream persists only in ``persist_all`` for local stores."""


async def open_offset_store(group: str, client_id: str, backend: OffsetBackend, *,
                            broadcasting: bool, local_dir: Path | str | None) -> OffsetStore:
    """The loaded offset store of a consumer: upstream's consumers keep BROADCASTING offsets
    in a local file and CLUSTERING offsets on the brokers."""
    store: OffsetStore
    if broadcasting:
        store = LocalFileOffsetStore(group, client_id, local_dir)
    else:
        store = RemoteBrokerOffsetStore(group, backend)
    await store.load()
    return store
