"""Producer and consumer groups -> client channels, and consumer subscriptions.

Contract (upstream ``ProducerManager``, ``ConsumerManager``, ``ConsumerGroupInfo``,
``ClientChannelInfo``, ``DefaultConsumerIdsChangeListener``, ``Broker2Client``,
``ClientHousekeepingService``; docs/PROTOCOL.md 4.6, 6.3):

* Each group maps a live ``Channel`` to a ``ClientChannelInfo`` (clientId, language,
  version, last heartbeat on the loop clock).
* A consumer heartbeat updates the group's subscriptions per topic: a new topic is added,
  a higher ``subVersion`` replaces the stored one, topics missing from the heartbeat are
  removed. A new channel, an added topic or a removed topic (not a mere ``subVersion``
  bump) sends NOTIFY_CONSUMER_IDS_CHANGED (oneway, JSON, header ``consumerGroup``) to every
  channel of the group, when the broker and the group allow it.
* A closed channel leaves every group at once (``on_channel_close``), and its consumer
  groups are notified. Housekeeping every 10 s closes channels silent for 120 s, which
  takes the same path.
* Notifications are oneway sends with upstream's 10 ms permit budget, each in a task
  this manager owns (``stop()`` awaits them); a refused permit is logged and dropped,
  as upstream.
* Each channel's own subscriptions (from its last heartbeat) are kept too: when the clients
  of a group start to subscribe differently, ``broker.subscription_inconsistent`` is logged
  as a warning with what each client subscribes to (``broker.subscription_consistent`` when
  they agree again); ``inconsistent_groups()`` feeds a metric.
* With ``filters`` set (the broker's ``ConsumerFilterManager``), every registration hands
  the heartbeat's subscriptions to it (upstream ``ConsumerGroupEvent.REGISTER``) and a
  group losing its last channel unregisters there (``UNREGISTER``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.channel import Channel
from aiorocketmq.protocol.codes import MixAll, RequestCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import RemotingError
from aiorocketmq.protocol.headers import NotifyConsumerIdsChangedRequestHeader
from aiorocketmq.protocol.routine import Routine

__all__ = [
    "ClientChannelInfo",
    "ConsumerGroupInfo",
    "ConsumerManager",
    "ProducerManager",
    "ClientHousekeeping",
    "CHANNEL_EXPIRED_TIMEOUT",
    "HOUSEKEEPING_INTERVAL",
]

log = get_logger("aiorocketmq.broker.clients")

CHANNEL_EXPIRED_TIMEOUT = 120.0  # ConsumerManager/ProducerManager.CHANNEL_EXPIRED_TIMEOUT, 120 s
HOUSEKEEPING_INTERVAL = 10.0  # ClientHousekeepingService: every 10 s
RETRY_GROUP_TOPIC_PREFIX = MixAll.RETRY_GROUP_TOPIC_PREFIX
NOTIFY_PERMIT_TIMEOUT = 0.01  # Broker2Client.notifyConsumerIdsChanged: invokeOneway(..., 10)


def _now() -> float:
    return asyncio.get_running_loop().time()


class ClientChannelInfo:
    """One client connection as a group member (upstream ``ClientChannelInfo``)."""

    __slots__ = ("channel", "client_id", "language", "version", "last_update")

    def __init__(self, channel: Channel, client_id: str, language: int, version: int) -> None:
        self.channel = channel
        self.client_id = client_id
        self.language = language
        self.version = version
        self.last_update = _now()

    def __repr__(self) -> str:
        return (f"ClientChannelInfo(client_id={self.client_id!r}, addr={self.channel.remote_addr}, "
                f"language={self.language}, version={self.version})")


class ConsumerGroupInfo:
    """Channels and subscriptions of one consumer group (upstream ``ConsumerGroupInfo``).

    Subscriptions are ``protocol.bodies.SubscriptionData`` objects keyed by topic.
    """

    __slots__ = ("group_name", "channels", "subscriptions", "consume_type", "message_model",
                 "consume_from_where", "last_update", "client_subscriptions")

    def __init__(self, group_name: str, consume_type: str, message_model: str,
                 consume_from_where: str) -> None:
        self.group_name = group_name
        self.channels: dict[Channel, ClientChannelInfo] = {}
        self.subscriptions: dict[str, Any] = {}
        self.consume_type = consume_type
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        self.last_update = _now()
        # What each channel's last heartbeat subscribed to: (topic, type, expression), the
        # group's own %RETRY% topic left out (every push consumer has it).
        self.client_subscriptions: dict[Channel, frozenset[tuple[str, str, str]]] = {}

    @property
    def subscription_consistent(self) -> bool:
        """Whether every client subscribes to the same topics with the same expressions."""
        return len(set(self.client_subscriptions.values())) <= 1

    def record_client_subscriptions(self, channel: Channel, subs: Iterable[Any]) -> None:
        self.client_subscriptions[channel] = frozenset(
            (sub.topic, sub.expression_type or "TAG", sub.sub_string or "*") for sub in subs
            if not sub.topic.startswith(RETRY_GROUP_TOPIC_PREFIX))

    def client_subscription_view(self) -> dict[str, list[str]]:
        """client id -> its subscriptions as ``topic:expression`` (for the warning)."""
        out = {}
        for channel, subs in self.client_subscriptions.items():
            info = self.channels.get(channel)
            out[info.client_id if info else channel.remote_addr] = sorted(
                f"{t}:{e}" if k == "TAG" else f"{t}:{k}:{e}" for t, k, e in subs)
        return dict(sorted(out.items()))

    def find_channel(self, client_id: str) -> ClientChannelInfo | None:
        for info in self.channels.values():
            if info.client_id == client_id:
                return info
        return None

    def all_channels(self) -> list[Channel]:
        return list(self.channels)

    def all_client_ids(self) -> list[str]:
        return [info.client_id for info in self.channels.values()]

    def update_channel(self, info: ClientChannelInfo, consume_type: str, message_model: str,
                       consume_from_where: str) -> bool:
        """Add or refresh a member; ``True`` when the channel is new."""
        self.consume_type = consume_type
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        old = self.channels.get(info.channel)
        updated = False
        if old is None:
            self.channels[info.channel] = info
            log.info("broker.consumer_connected", group=self.group_name,
                     client_id=info.client_id, addr=info.channel.remote_addr)
            old = info
            updated = True
        elif old.client_id != info.client_id:
            log.error("broker.consumer_client_id_changed", group=self.group_name,
                      old=old.client_id, new=info.client_id)
            self.channels[info.channel] = info
            old = info
        self.last_update = _now()
        old.last_update = self.last_update
        return updated

    def update_subscription(self, subs: Iterable[Any]) -> bool:
        """docs/PROTOCOL.md 4.6 rules; ``True`` when a topic was added or removed."""
        updated = False
        topics = set()
        for sub in subs:
            topics.add(sub.topic)
            old = self.subscriptions.get(sub.topic)
            if old is None:
                self.subscriptions[sub.topic] = sub
                updated = True
                log.info("broker.subscription_added", group=self.group_name, topic=sub.topic,
                         expression=sub.sub_string)
            elif sub.sub_version > old.sub_version:
                self.subscriptions[sub.topic] = sub
        for topic in [t for t in self.subscriptions if t not in topics]:
            del self.subscriptions[topic]
            updated = True
            log.warning("broker.subscription_removed", group=self.group_name, topic=topic)
        self.last_update = _now()
        return updated


class ConsumerManager:
    """Consumer groups by name (upstream ``ConsumerManager``)."""

    def __init__(self, *, notify_enable: bool = True) -> None:
        self.groups: dict[str, ConsumerGroupInfo] = {}
        self._notify_enable = notify_enable
        self.filters: Any = None  # broker.filter.ConsumerFilterManager, set by the controller
        self._tasks: set[asyncio.Task[None]] = set()

    def get(self, group: str) -> ConsumerGroupInfo | None:
        return self.groups.get(group)

    def find_subscription_data(self, group: str, topic: str) -> Any | None:
        info = self.groups.get(group)
        return None if info is None else info.subscriptions.get(topic)

    def find_channel(self, group: str, client_id: str) -> ClientChannelInfo | None:
        info = self.groups.get(group)
        return None if info is None else info.find_channel(client_id)

    def register_consumer(self, group: str, info: ClientChannelInfo, consume_type: str,
                          message_model: str, consume_from_where: str, subs: Iterable[Any],
                          notify: bool) -> bool:
        """Upstream ``registerConsumer``; ``notify`` is the group's notify switch."""
        group_info = self.groups.get(group)
        if group_info is None:
            group_info = self.groups[group] = ConsumerGroupInfo(
                group, consume_type, message_model, consume_from_where)
        r1 = group_info.update_channel(info, consume_type, message_model, consume_from_where)
        subs = list(subs)
        r2 = group_info.update_subscription(subs)
        was_consistent = group_info.subscription_consistent
        group_info.record_client_subscriptions(info.channel, subs)
        self._report_consistency(group_info, was_consistent)
        if (r1 or r2) and notify:
            self.notify_consumer_ids_changed(group, group_info.all_channels())
        if self.filters is not None:
            self.filters.register_group(group, subs)
        return r1 or r2

    def unregister_consumer(self, group: str, info: ClientChannelInfo, notify: bool) -> None:
        group_info = self.groups.get(group)
        if group_info is None:
            return
        old = group_info.channels.pop(info.channel, None)
        was_consistent = group_info.subscription_consistent
        group_info.client_subscriptions.pop(info.channel, None)
        self._report_consistency(group_info, was_consistent)
        if old is not None:
            log.info("broker.consumer_unregistered", group=group, client_id=old.client_id)
        if not group_info.channels:
            del self.groups[group]
            if self.filters is not None:
                self.filters.unregister(group)
        if notify:
            self.notify_consumer_ids_changed(group, group_info.all_channels())

    def on_channel_close(self, channel: Channel) -> None:
        """Drop ``channel`` from every group and notify the remaining members."""
        for group in list(self.groups):
            group_info = self.groups[group]
            info = group_info.channels.pop(channel, None)
            if info is None:
                continue
            was_consistent = group_info.subscription_consistent
            group_info.client_subscriptions.pop(channel, None)
            self._report_consistency(group_info, was_consistent)
            log.warning("broker.consumer_channel_removed", group=group, client_id=info.client_id,
                        addr=channel.remote_addr)
            if not group_info.channels:
                del self.groups[group]
                if self.filters is not None:
                    self.filters.unregister(group)
            self.notify_consumer_ids_changed(group, group_info.all_channels())

    @staticmethod
    def _report_consistency(group_info: ConsumerGroupInfo, was_consistent: bool) -> None:
        """Log when a group's clients start or stop disagreeing on their subscriptions: the
        usual cause of "lost" messages (each client gets only its share of the queues and
        skips what its own tags filter out)."""
        now = group_info.subscription_consistent
        if was_consistent and not now:
            log.warning("broker.subscription_inconsistent", group=group_info.group_name,
                        clients=group_info.client_subscription_view())
        elif now and not was_consistent:
            log.info("broker.subscription_consistent", group=group_info.group_name)

    def inconsistent_groups(self) -> list[str]:
        """Groups whose online clients subscribe differently."""
        return sorted(g for g, info in self.groups.items() if not info.subscription_consistent)

    def expired_channels(self, now: float) -> list[Channel]:
        return [ch for g in self.groups.values() for ch, info in g.channels.items()
                if now - info.last_update > CHANNEL_EXPIRED_TIMEOUT]

    def query_topic_consume_by_who(self, topic: str) -> set[str]:
        return {g for g, info in self.groups.items() if topic in info.subscriptions}

    # -- NOTIFY_CONSUMER_IDS_CHANGED ------------------------------------------------------

    def notify_consumer_ids_changed(self, group: str, channels: list[Channel]) -> None:
        if not self._notify_enable:
            return
        for channel in channels:
            if channel.is_closed:
                continue
            task = asyncio.get_running_loop().create_task(self._notify(channel, group))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _notify(self, channel: Channel, group: str) -> None:
        header = NotifyConsumerIdsChangedRequestHeader(consumer_group=group)
        request = RemotingCommand.create_request(
            RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, header.to_ext_fields())
        try:
            await channel.invoke_oneway(request, NOTIFY_PERMIT_TIMEOUT)
        except RemotingError as exc:
            log.warning("broker.notify_consumer_ids_changed_failed", group=group,
                        addr=channel.remote_addr, error=str(exc))

    async def stop(self) -> None:
        tasks = list(self._tasks)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


class ProducerManager:
    """Producer groups by name (upstream ``ProducerManager``)."""

    def __init__(self) -> None:
        self.groups: dict[str, dict[Channel, ClientChannelInfo]] = {}

    def register_producer(self, group: str, info: ClientChannelInfo) -> None:
        channels = self.groups.setdefault(group, {})
        old = channels.get(info.channel)
        if old is None:
            channels[info.channel] = info
            log.info("broker.producer_registered", group=group, client_id=info.client_id,
                     addr=info.channel.remote_addr)
        else:
            old.last_update = _now()

    def unregister_producer(self, group: str, info: ClientChannelInfo) -> None:
        channels = self.groups.get(group)
        if channels is None:
            return
        if channels.pop(info.channel, None) is not None:
            log.info("broker.producer_unregistered", group=group, client_id=info.client_id)
        if not channels:
            del self.groups[group]

    def on_channel_close(self, channel: Channel) -> None:
        for group in list(self.groups):
            channels = self.groups[group]
            if channels.pop(channel, None) is not None and not channels:
                del self.groups[group]

    def expired_channels(self, now: float) -> list[Channel]:
        return [ch for channels in self.groups.values() for ch, info in channels.items()
                if now - info.last_update > CHANNEL_EXPIRED_TIMEOUT]

    def available_channel(self, group: str) -> Channel | None:
        """A live channel of ``group`` (transaction checks), or ``None``."""
        for channel in self.groups.get(group, {}):
            if channel.is_active:
                return channel
        return None


class ClientHousekeeping:
    """Every 10 s, close client channels silent for 120 s (upstream ``ClientHousekeepingService``).

    Closing a channel runs the server's close callback, which removes it from every group.
    """

    def __init__(self, producers: ProducerManager, consumers: ConsumerManager) -> None:
        self._producers = producers
        self._consumers = consumers
        self._routine = Routine(self._housekeeping_routine, "ClientHousekeepingService")

    def start(self) -> None:
        self._routine.start()

    def scan_not_active_channels(self) -> int:
        now = _now()
        expired = set(self._producers.expired_channels(now)) | set(
            self._consumers.expired_channels(now))
        for channel in expired:
            log.warning("broker.client_channel_expired", addr=channel.remote_addr)
            channel.close()
            # A channel the server does not track (already closed) still leaves the tables.
            self._producers.on_channel_close(channel)
            self._consumers.on_channel_close(channel)
        return len(expired)

    async def _housekeeping_routine(self) -> None:
        while True:
            await asyncio.sleep(HOUSEKEEPING_INTERVAL)
            self.scan_not_active_channels()

    async def stop(self) -> None:
        await self._routine.stop()
