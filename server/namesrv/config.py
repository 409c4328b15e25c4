"""NamesrvConfig: the nameserver's settings, read from upstream ``namesrv.properties`` keys.

Upstream ``NamesrvConfig`` (common/namesrv/NamesrvConfig.java) plus the few
``NettyServerConfig`` keys our server honours (``listenPort``, the 5.x ``bindAddress``,
the idle timeout and the permit pools), plus two timings upstream hard-codes
(docs/PROTOCOL.md 4.4, 6.9) and which we make settable so tests can shorten expiry:

* ``scanNotActiveBrokerInterval`` (ms, default 10 000): how often the expiry scan runs
  (4.9.x: every 10 s; 5.x names this key and uses 5 s).
* ``brokerChannelExpiredTime`` (ms, default 120 000): a broker silent for longer is removed
  (``RouteInfoManager.BROKER_CHANNEL_EXPIRED_TIME``).

``from_properties`` parses the way upstream ``MixAll.properties2Object`` does (``int``,
``Boolean.parseBoolean``, strings) except that a malformed number is an error instead of
being skipped silently; keys we do not know are kept in ``extra`` and reported back by
GET_NAMESRV_CONFIG, as upstream's ``Configuration.registerConfig(properties)`` keeps them.
``to_properties`` is the ``key -> value`` table GET_NAMESRV_CONFIG renders as Java
properties text (captured frame 1099 lists the same keys).

``config_key_report(props)`` sorts a ``-c`` file's keys that no setting reads into stock
keys we accept and do not use (``STOCK_NAMESRV_KEYS``: the fields of 4.9.7's
``NamesrvConfig`` and ``NettyServerConfig``, which ``NamesrvStartup`` fills from the file)
and unknown ones, each with its likely intended key; ``mqnamesrv`` logs both, as ``mqbroker``
does its own.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aiorocketmq.protocol.codes import MixAll
from aiorocketmq.protocol.javautil import camel_case

__all__ = ["NamesrvConfig", "ConfigError", "PATH_KEYS", "STOCK_NAMESRV_KEYS", "config_key_report"]

# UPDATE_NAMESRV_CONFIG may not change these (DefaultRequestProcessor.updateConfig).
PATH_KEYS = frozenset({"kvConfigPath", "configStorePath"})


class ConfigError(ValueError):
    """A configuration value that does not parse (names the key and the value)."""


def _default_home_file(name: str) -> str:
    return str(Path.home() / "namesrv" / name)


@dataclasses.dataclass(slots=True)
class NamesrvConfig:
    """Nameserver settings; attribute names are snake_case, property keys camelCase."""

    rocketmq_home: str = dataclasses.field(
        default_factory=lambda: os.environ.get("ROCKETMQ_HOME", ""))
    kv_config_path: str = dataclasses.field(
        default_factory=lambda: _default_home_file("kvConfig.json"))
    config_store_path: str = dataclasses.field(
        default_factory=lambda: _default_home_file("namesrv.properties"))
    product_env_name: str = "center"
    cluster_test: bool = False
    order_message_enable: bool = False
    listen_port: int = MixAll.DEFAULT_NAMESRV_PORT
    bind_address: str = "127.0.0.1"
    server_channel_max_idle_time_seconds: int = 120
    server_oneway_semaphore_value: int = 256
    server_async_semaphore_value: int = 64
    scan_not_active_broker_interval_ms: int = 10_000
    broker_channel_expired_time_ms: int = 120_000
    extra: dict[str, str] = dataclasses.field(default_factory=dict)

    # -- properties ---------------------------------------------------------------------

    @classmethod
    def from_properties(cls, props: Mapping[str, str], *,
                        base: NamesrvConfig | None = None) -> NamesrvConfig:
        """A config with ``props`` applied over ``base`` (or the defaults).

        Raises:
            ConfigError: a known key whose value is not of the key's type.
        """
        cfg = dataclasses.replace(base) if base is not None else cls()
        cfg.extra = dict(cfg.extra)
        cfg.apply(props)
        return cfg

    def parse(self, props: Mapping[str, str]) -> dict[str, Any]:
        """Validate ``props``: ``attribute -> typed value`` for known keys, ``extra`` aside.

        Nothing is changed; raises ``ConfigError`` for the first bad value.
        """
        typed: dict[str, Any] = {}
        for key, raw in props.items():
            attr = _ATTR_BY_KEY.get(key)
            if attr is None:
                continue
            value = _PARSERS[_TYPES[attr]](key, raw)
            bounds = _BOUNDS.get(attr)
            if bounds is not None and isinstance(value, int) and not (
                    bounds[0] <= value <= bounds[1]):
                raise ConfigError(f"config {key}={raw!r} is outside {bounds[0]}..{bounds[1]}")
            typed[attr] = value
        return typed

    def apply(self, props: Mapping[str, str]) -> None:
        """Apply ``props`` all or nothing (every value is parsed before any is set)."""
        typed = self.parse(props)
        for attr, value in typed.items():
            setattr(self, attr, value)
        for key, raw in props.items():
            if key not in _ATTR_BY_KEY:
                self.extra[key] = raw

    def update(self, props: Mapping[str, str]) -> list[str]:
        """UPDATE_NAMESRV_CONFIG: change only keys that already exist, all or nothing.

        Upstream ``Configuration.update`` (``mergeIfExist`` + ``properties2Object``): a key
        that is neither a setting nor a kept extra is ignored. Returns the ignored keys.

        Raises:
            ConfigError: a known key whose value is not of the key's type.
        """
        typed = self.parse(props)
        for attr, value in typed.items():
            setattr(self, attr, value)
        ignored = []
        for key, raw in props.items():
            if key in _ATTR_BY_KEY:
                continue
            if key in self.extra:
                self.extra[key] = raw
            else:
                ignored.append(key)
        return ignored

    def to_properties(self) -> dict[str, str]:
        """Every setting as upstream property text values (``true``/``false``, decimals)."""
        out: dict[str, str] = {}
        for key, attr in _ATTR_BY_KEY.items():
            value = getattr(self, attr)
            if isinstance(value, bool):
                out[key] = "true" if value else "false"
            else:
                out[key] = str(value)
        for key, value in self.extra.items():
            out.setdefault(key, value)
        return out

    # -- derived ------------------------------------------------------------------------

    @property
    def scan_interval(self) -> float:
        """The expiry scan period in seconds (asyncio's unit)."""
        return self.scan_not_active_broker_interval_ms / 1000


# Attributes whose upstream key is not their mechanical camelCase: our durations say the unit.
_KEYS = {
    "scan_not_active_broker_interval_ms": "scanNotActiveBrokerInterval",
    "broker_channel_expired_time_ms": "brokerChannelExpiredTime",
}
# Property key -> attribute, in field order (the order GET_NAMESRV_CONFIG lists them).
_ATTR_BY_KEY: dict[str, str] = {
    _KEYS.get(f.name) or camel_case(f.name): f.name
    for f in dataclasses.fields(NamesrvConfig) if f.name != "extra"
}

# Values outside these ranges would stop the server working (a zero scan period spins).
_BOUNDS: dict[str, tuple[int, int]] = {
    "listen_port": (0, 65535),
    "server_channel_max_idle_time_seconds": (1, 2**31 - 1),
    "server_oneway_semaphore_value": (1, 2**31 - 1),
    "server_async_semaphore_value": (1, 2**31 - 1),
    "scan_not_active_broker_interval_ms": (1, 2**31 - 1),
    "broker_channel_expired_time_ms": (1, 2**63 - 1),
}

# Annotations are strings under ``from __future__ import annotations``.
_TYPE_NAMES: dict[str, type] = {"int": int, "bool": bool, "str": str}
_TYPES: dict[str, type] = {
    f.name: _TYPE_NAMES[str(f.type)] for f in dataclasses.fields(NamesrvConfig) if f.name != "extra"
}


def _parse_int(key: str, raw: str) -> int:
    try:
        # Java's Integer.parseInt takes no surrounding blanks; properties values keep
        # trailing blanks, which is a classic hand-edited-file trap, so we strip them.
        return int(raw.strip(), 10)
    except ValueError:
        raise ConfigError(f"config {key}={raw!r} is not an integer") from None


def _parse_bool(key: str, raw: str) -> bool:
    # Boolean.parseBoolean: "true" in any case is true, everything else false.
    return raw.strip().lower() == "true"


def _parse_str(key: str, raw: str) -> str:
    return raw


_PARSERS = {int: _parse_int, bool: _parse_bool, str: _parse_str}


# The field names of rocketmq-all-4.9.7's NamesrvConfig and NettyServerConfig: the keys
# NamesrvStartup reads from its -c file (MixAll.properties2Object on both).
STOCK_NAMESRV_KEYS = frozenset({
    # NamesrvConfig
    "rocketmqHome", "kvConfigPath", "configStorePath", "productEnvName", "clusterTest",
    "orderMessageEnable",
    # NettyServerConfig
    "listenPort", "serverWorkerThreads", "serverCallbackExecutorThreads", "serverSelectorThreads",
    "serverOnewaySemaphoreValue", "serverAsyncSemaphoreValue", "serverChannelMaxIdleTimeSeconds",
    "serverSocketSndBufSize", "serverSocketRcvBufSize", "writeBufferHighWaterMark",
    "writeBufferLowWaterMark", "serverSocketBacklog", "serverPooledByteBufAllocatorEnable",
    "useEpollNativeSelector",
})


def config_key_report(props: Mapping[str, str], also_read: frozenset[str] = frozenset()
                      ) -> tuple[list[str], list[tuple[str, str | None]]]:
    """``(stock keys accepted but not used, [(unknown key, closest known key or None)])``.

    ``also_read``: keys other parts read from the same file (``metricsPort``, ...). Both
    kinds are kept in ``extra`` and reported by GET_NAMESRV_CONFIG, as upstream keeps them.
    """
    ours = set(_ATTR_BY_KEY) | also_read
    known = sorted(ours | STOCK_NAMESRV_KEYS)
    not_used: list[str] = []
    unknown: list[tuple[str, str | None]] = []
    for key in props:
        if key in ours:
            continue
        if key in STOCK_NAMESRV_KEYS:
            not_used.append(key)
            continue
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.75)
        unknown.append((key, close[0] if close else None))
    return sorted(not_used), unknown
