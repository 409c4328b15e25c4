"""KVConfigManager: the nameserver's namespaced key/value table, persisted to one JSON file.

Upstream ``kvconfig/KVConfigManager`` and ``KVConfigSerializeWrapper``: namespace ->
{key: value}, written after every change as ``{"configTable":{"ns":{"k":"v"}}}`` to
``kvConfigPath`` and read back at start. The ``ORDER_TOPIC_CONFIG`` namespace feeds
``TopicRouteData.orderTopicConf`` and the REGISTER_BROKER answer (docs/PROTOCOL.md 4.3, 4.4).

Contract:

* Reads and in-memory changes are synchronous and immediate (one event loop, no lock).
* ``put`` / ``delete`` return once the change is on disk: the file is written to a
  temporary sibling, fsynced, renamed over the old one and the directory fsynced, on a
  worker thread so the loop never blocks on the disk. Concurrent changes coalesce: one
  write carries every change made before it started, and each caller waits only for the
  first write that includes its own change. Writes run one at a time, each to its end even
  when its caller is cancelled (a client hanging up mid-request), so the file always ends
  at the newest state written (``client.atomic_file.AtomicFileWriter``).
* ``put`` refuses (``ValueError``, nothing changed) a namespace, key or value that UTF-8
  cannot write, so the file always holds every entry in memory.
* ``load()`` runs once before serving; a file that does not parse is an error (upstream
  fails its start the same way) rather than silently starting empty and overwriting it.
  It also removes the temp files a crash left next to the file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.atomic_file import AtomicFileWriter, remove_stale_temp_files
from aiorocketmq.protocol.validation import text_problem

__all__ = ["KVConfigManager", "KVConfigLoadError"]

log = get_logger("aiorocketmq.namesrv.kv")


class KVConfigLoadError(RuntimeError):
    """The persisted KV file exists but is not a ``{"configTable": {...}}`` document."""


class KVConfigManager:
    """Namespaced string key/value store with durable, atomic persistence."""

    __slots__ = ("path", "_table", "_generation", "_persisted", "_writer")

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._table: dict[str, dict[str, str]] = {}
        self._generation = 0  # bumped by every change
        self._persisted = 0  # generation the file on disk reflects
        self._writer = AtomicFileWriter(self.path)

    # -- start ----------------------------------------------------------------------------

    def load(self) -> None:
        """Read the persisted table (a missing file means an empty table).

        Raises:
            KVConfigLoadError: the file exists but does not hold a valid table.
        """
        remove_stale_temp_files(self.path)
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            log.info("namesrv.kv_load_empty", path=str(self.path))
            return
        try:
            doc = json.loads(text) if text.strip() else {}
        except ValueError as exc:
            raise KVConfigLoadError(f"KV config file {self.path} is not JSON: {exc}") from exc
        table = doc.get("configTable", {}) if isinstance(doc, dict) else None
        if not isinstance(table, dict) or not all(
            isinstance(ns, str) and isinstance(kv, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in kv.items())
            for ns, kv in table.items()
        ):
            raise KVConfigLoadError(
                f"KV config file {self.path} has no configTable of namespace -> "
                f"{{key: string value}}")
        self._table = {ns: dict(kv) for ns, kv in table.items()}
        log.info("namesrv.kv_loaded", path=str(self.path), namespaces=len(self._table))

    # -- reads ----------------------------------------------------------------------------

    def get(self, namespace: str, key: str) -> str | None:
        kv = self._table.get(namespace)
        return None if kv is None else kv.get(key)

    def get_namespace(self, namespace: str) -> dict[str, str] | None:
        """A copy of one namespace's table, or ``None`` if the namespace does not exist.

        An existing namespace whose keys were all deleted is ``{}``, not ``None``, as
        upstream keeps the emptied map (GET_KVLIST_BY_NAMESPACE answers an empty table).
        """
        kv = self._table.get(namespace)
        return None if kv is None else dict(kv)

    @property
    def namespaces(self) -> list[str]:
        return list(self._table)

    # -- changes --------------------------------------------------------------------------

    async def put(self, namespace: str, key: str, value: str) -> None:
        """Set ``namespace/key`` to ``value`` and wait until it is on disk.

        Raises:
            ValueError: a part is not text UTF-8 can write (a lone surrogate); nothing
            changed, so one such entry can never block the file.
            OSError: the file could not be written (the change stays in memory and is
            written with the next successful persist).
        """
        for part, text in (("namespace", namespace), ("key", key), ("value", value)):
            problem = text_problem(text)
            if problem is not None:
                raise ValueError(f"KV {part} {problem}")
        kv = self._table.setdefault(namespace, {})
        prev = kv.get(key)
        kv[key] = value
        self._generation += 1
        log.info("namesrv.kv_put", namespace=namespace, key=key, value=value,
                 created=prev is None)
        await self.persist()

    async def delete(self, namespace: str, key: str) -> None:
        """Remove ``namespace/key`` (absent is fine) and wait until the file says so."""
        kv = self._table.get(namespace)
        if kv is not None:
            value = kv.pop(key, None)
            log.info("namesrv.kv_delete", namespace=namespace, key=key, value=value)
        self._generation += 1
        await self.persist()

    async def persist(self) -> None:
        """Write the table if the file is older than the latest change; coalesces callers."""
        wanted = self._generation
        if self._persisted >= wanted:
            return
        generation = wanted

        def encode() -> bytes | None:
            nonlocal generation
            if self._persisted >= wanted:
                return None  # a write that started after our change already covered it
            generation = self._generation
            return self.encode().encode("utf-8")

        def written() -> None:
            self._persisted = max(self._persisted, generation)

        await self._writer.write(encode, written)

    def encode(self) -> str:
        """The file content: fastjson's form of ``KVConfigSerializeWrapper``."""
        return json.dumps({"configTable": self._table}, ensure_ascii=False,
                          separators=(",", ":"))


