"""Broker configuration: upstream ``BrokerConfig`` (plus the listen port) with upstream names and defaults.

Contract: ``BrokerConfig`` is a slotted dataclass read once at start; every field carries
its upstream camelCase key (``brokerClusterName``, ``brokerIP1``, ``shortPollingTimeMills``,
...) in its metadata, so ``BrokerConfig.from_properties(props)`` reads an upstream
``broker.conf`` and ``to_properties()`` writes upstream's ``key=value`` text (the body of
GET_BROKER_CONFIG, ``MixAll.properties2String``). Keys of other components sharing the
file are ignored here; ``load_broker_configs`` returns both this record and the store's
``MessageStoreConfig`` parsed from the same properties, and ``unknown_broker_keys`` names
the keys that neither reads (``mqbroker`` warns about each).

``listenPort`` 0 asks for any free port: the bound port then becomes the broker address
and the store host (``BrokerController`` sets ``listen_port`` after binding).

Upstream: ``common/src/main/java/org/apache/rocketmq/common/BrokerConfig.java``,
``remoting/netty/NettyServerConfig.java`` (listenPort), ``broker/BrokerStartup.java``.
"""

from __future__ import annotations

import dataclasses
import difflib
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiorocketmq.protocol.codes import Perm, SystemTopic
from aiorocketmq.server.store.config import MessageStoreConfig, parse_property_value, store_key

__all__ = ["BrokerConfig", "load_broker_configs", "store_config_to_properties",
           "unknown_broker_keys"]


def _key(name: str, default: Any = dataclasses.MISSING, **kw: Any) -> Any:
    """A dataclass field whose upstream camelCase key is ``name``."""
    if "default_factory" in kw:
        return field(metadata={"key": name}, default_factory=kw["default_factory"])
    return field(default=default, metadata={"key": name})


def _local_host_name() -> str:
    try:
        return socket.gethostname() or "DEFAULT_BROKER"
    except OSError:  # pragma: no cover - as upstream BrokerConfig.localHostName
        return "DEFAULT_BROKER"


@dataclass(slots=True)
class BrokerConfig:
    """Broker options; attribute names are upstream's in snake_case, units in the name."""

    namesrv_addr: str | None = _key("namesrvAddr", None)
    broker_ip1: str = _key("brokerIP1", "127.0.0.1")
    broker_ip2: str = _key("brokerIP2", "127.0.0.1")
    broker_name: str = _key("brokerName", default_factory=_local_host_name)
    broker_cluster_name: str = _key("brokerClusterName", "DefaultCluster")
    broker_id: int = _key("brokerId", 0)
    listen_port: int = _key("listenPort", 10911)
    broker_permission: int = _key("brokerPermission", int(Perm.READ | Perm.WRITE))
    default_topic_queue_nums: int = _key("defaultTopicQueueNums", 8)
    auto_create_topic_enable: bool = _key("autoCreateTopicEnable", True)
    cluster_topic_enable: bool = _key("clusterTopicEnable", True)
    broker_topic_enable: bool = _key("brokerTopicEnable", True)
    auto_create_subscription_group: bool = _key("autoCreateSubscriptionGroup", True)
    msg_trace_topic_name: str = _key("msgTraceTopicName", SystemTopic.TRACE_TOPIC)
    trace_topic_enable: bool = _key("traceTopicEnable", False)
    flush_consumer_offset_interval_ms: int = _key("flushConsumerOffsetInterval", 5000)
    reject_transaction_message: bool = _key("rejectTransactionMessage", False)
    long_polling_enable: bool = _key("longPollingEnable", True)
    short_polling_time_ms: int = _key("shortPollingTimeMills", 1000)
    notify_consumer_ids_changed_enable: bool = _key("notifyConsumerIdsChangedEnable", True)
    region_id: str = _key("regionId", "DefaultRegion")
    register_broker_timeout_ms: int = _key("registerBrokerTimeoutMills", 6000)
    slave_read_enable: bool = _key("slaveReadEnable", False)
    trace_on: bool = _key("traceOn", True)
    filter_support_retry: bool = _key("filterSupportRetry", False)
    enable_property_filter: bool = _key("enablePropertyFilter", False)
    compressed_register: bool = _key("compressedRegister", False)
    force_register: bool = _key("forceRegister", True)
    register_name_server_period_ms: int = _key("registerNameServerPeriod", 30000)
    transaction_timeout_ms: int = _key("transactionTimeOut", 6000)
    transaction_check_max: int = _key("transactionCheckMax", 15)
    transaction_check_interval_ms: int = _key("transactionCheckInterval", 60000)
    acl_enable: bool = _key("aclEnable", False)
    store_reply_message_enable: bool = _key("storeReplyMessageEnable", True)
    # Send-path flow control (upstream BrokerFastFailure and the send executor's queue; see
    # server/broker/processors/send.py): read live, so UPDATE_BROKER_CONFIG takes effect at once.
    broker_fast_failure_enable: bool = _key("brokerFastFailureEnable", True)
    wait_time_in_send_queue_ms: int = _key("waitTimeMillsInSendQueue", 200)
    send_thread_pool_queue_capacity: int = _key("sendThreadPoolQueueCapacity", 10000)
    # Not upstream (Java bounds parked pulls only by memory): long-polling caps, see long_polling.py.
    max_suspended_pulls_per_queue: int = _key("maxSuspendedPullsPerQueue", 1024)
    max_suspended_pulls: int = _key("maxSuspendedPulls", 65536)
    # Not upstream (4.9.x has no Prometheus endpoint): server/metrics; mqbroker's
    # --metrics-port / --slow-request-ms flags win over these keys.
    metrics_port: int | None = _key("metricsPort", None)  # None: no endpoint; 0: any free port
    slow_request_ms: float = _key("slowRequestMillis", 1000.0)  # <= 0: no slow-request log

    def __post_init__(self) -> None:
        if not 0 <= self.listen_port <= 65535:
            raise ValueError(f"listenPort must be 0..65535, got {self.listen_port}")
        if self.broker_permission & ~0xF:
            raise ValueError(f"brokerPermission has unknown bits: {self.broker_permission}")
        if self.default_topic_queue_nums < 1:
            raise ValueError("defaultTopicQueueNums must be positive")
        if self.send_thread_pool_queue_capacity < 1:
            raise ValueError("sendThreadPoolQueueCapacity must be positive")  # LinkedBlockingQueue
        if self.wait_time_in_send_queue_ms < 0:
            raise ValueError("waitTimeMillsInSendQueue must not be negative")
        if self.max_suspended_pulls_per_queue < 1 or self.max_suspended_pulls < 1:
            raise ValueError("suspended pull caps must be positive")
        if self.metrics_port is not None and not 0 <= self.metrics_port <= 65535:
            raise ValueError(f"metricsPort must be 0..65535, got {self.metrics_port}")

    # -- derived values ---------------------------------------------------------------

    @property
    def broker_addr(self) -> str:
        """``brokerIP1:listenPort``: the address registered and embedded in offset msg ids."""
        return f"{self.broker_ip1}:{self.listen_port}"

    @property
    def ha_server_addr(self) -> str:
        """``brokerIP2:haListenPort``; BrokerStartup sets haListenPort = listenPort + 1."""
        return f"{self.broker_ip2}:{self.listen_port + 1}"

    @property
    def register_period_ms(self) -> int:
        """``BrokerController.start``: the period is clamped to 10..60 s."""
        return min(max(10000, self.register_name_server_period_ms), 60000)

    @property
    def namesrv_addr_list(self) -> list[str]:
        """``namesrvAddr`` split on ``;`` (upstream ``updateNameServerAddressList``)."""
        if not self.namesrv_addr:
            return []
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]

    # -- (de)serialization ------------------------------------------------------------

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> BrokerConfig:
        """Build from upstream camelCase keys; keys of other components are ignored.

        Raises:
            ValueError: a known key whose value does not parse, or an invalid value.
        """
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            key = f.metadata["key"]
            if key in props:
                if f.type == "float" and not str(props[key]).strip():
                    continue  # a blank float key keeps its default (as metricsPort= means off)
                kwargs[f.name] = parse_property_value(f.type, props[key], key, "broker")
        return cls(**kwargs)

    def to_properties(self, store: MessageStoreConfig | None = None) -> str:
        """Upstream ``key=value`` lines (GET_BROKER_CONFIG body), store keys appended."""
        lines = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            lines.append(f"{f.metadata['key']}={_render(value)}\n")
        text = "".join(lines)
        if store is not None:
            text += store_config_to_properties(store)
        return text


def unknown_broker_keys(props: Mapping[str, Any]) -> list[tuple[str, str | None]]:
    """Keys of a ``broker.conf`` that neither ``BrokerConfig`` nor ``MessageStoreConfig`` reads,
    each with the closest known key (a likely misspelling) or None.

    Upstream ``MixAll.properties2Object`` ignores such keys silently; ``mqbroker`` warns,
    since a misspelt ``listenPort`` otherwise leaves the broker on its default port.
    """
    known = [f.metadata["key"] for f in dataclasses.fields(BrokerConfig)]
    known += [store_key(f.name) for f in dataclasses.fields(MessageStoreConfig)]
    out: list[tuple[str, str | None]] = []
    for key in props:
        if key in known or MessageStoreConfig.knows_key(key):
            continue
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.75)
        out.append((key, close[0] if close else None))
    return out


def load_broker_configs(props: Mapping[str, Any]) -> tuple[BrokerConfig, MessageStoreConfig]:
    """Both records a broker reads from one ``broker.conf`` (``BrokerStartup.createBrokerController``).

    ``brokerRole`` is a store key upstream, read by the store; the broker asks the store.
    """
    return BrokerConfig.from_properties(props), MessageStoreConfig.from_properties(props)


def store_config_to_properties(store: MessageStoreConfig) -> str:
    """The store's options as upstream ``key=value`` lines."""
    lines = []
    for f in dataclasses.fields(store):
        value = getattr(store, f.name)
        if value is None:
            continue
        key = store_key(f.name)
        lines.append(f"{key}={_render(value)}\n")
    return "".join(lines)


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)
