"""A slave's copy of its master's metadata: upstream ``broker/slave/SlaveSynchronize``.

Contract:

* ``master_addr`` is the master's broker address from the nameserver's REGISTER_BROKER
  answer (``BrokerController.doRegisterBrokerAll``); None until known.
* ``start()`` runs ``sync_all`` first after 3 s, then every 10 s
  (``BrokerController.handleSlaveSynchronize``); ``pause()`` cancels it (it may start
  again), ``stop()`` cancels it and closes the client.
* ``sync_all`` asks the master, in upstream's order, for: topics (GET_ALL_TOPIC_CONFIG:
  the table is replaced when the DataVersion differs), consumer offsets
  (GET_ALL_CONSUMER_OFFSET: merged over ours, the master's entries win, so offsets
  committed to this slave while the master was away are kept until the master has its
  own), delay offsets (GET_ALL_DELAY_OFFSET: replaced) and subscription groups
  (GET_ALL_SUBSCRIPTIONGROUP_CONFIG: replaced when the DataVersion differs). Each is
  persisted. With ``timerWheelEnable`` then the timer counts (GET_TIMER_METRICS: replaced
  and written to ``config/timermetrics`` when the DataVersion differs, as stock 5.x's
  ``syncTimerMetrics``), so the slave answers its master's counts. The timer checkpoint is
  not copied (stock's ``syncTimerCheckPoint``): our slave keeps no timer log or wheel for it
  to describe; its store restarted as a master rebuilds them from the timer topic
  (``server/store/timer``). A failed step is logged and the others still run; nothing is
  raised.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.bodies import (
    ConsumerOffsetSerializeWrapper,
    DataVersion,
    SubscriptionGroupWrapper,
    TopicConfigSerializeWrapper,
)
from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import RocketMQError
from aiorocketmq.protocol.remoting_client import RemotingClient
from aiorocketmq.protocol.routine import Routine

from .schedule import decode_delay_offsets

if TYPE_CHECKING:
    from .controller import BrokerController
    from .subscription_group import SubscriptionGroupManager
    from .topic_config import TopicConfigManager

__all__ = ["SlaveSynchronize"]

log = get_logger("aiorocketmq.broker.slave")

FIRST_DELAY = 3.0
PERIOD = 10.0
TIMEOUT = 3.0


class SlaveSynchronize:
    def __init__(self, broker: BrokerController) -> None:
        self._b = broker
        self._client = RemotingClient()
        self.master_addr: str | None = None
        self.last_sync_ok = False
        self._routine = Routine(self._sync_routine, "SlaveSynchronize")

    def start(self) -> None:
        self._routine.start()

    async def pause(self) -> None:
        """Cancel the routine, keep the client: ``start()`` may run it again (a DLedger
        broker that became master, and may be a slave again later)."""
        await self._routine.stop()

    async def stop(self) -> None:
        """Cancel the routine and close the connection to the master. Idempotent."""
        await self._routine.stop()
        await self._client.close()

    async def _sync_routine(self) -> None:
        await asyncio.sleep(FIRST_DELAY)
        while True:
            await self.sync_all()
            await asyncio.sleep(PERIOD)  # a period, not a synchronisation

    async def _fetch(self, addr: str, code: int) -> bytes:
        response = await self._client.invoke(addr, RemotingCommand.create_request(code), TIMEOUT)
        if response.code != ResponseCode.SUCCESS:
            raise RocketMQError(f"master {addr} answered request {code} with code "
                                f"{response.code}: {response.remark}")
        return bytes(response.body or b"")

    async def sync_all(self) -> bool:
        """One round; True when every step succeeded."""
        addr = self.master_addr
        if not addr or addr == self._b.broker_addr:
            return False
        ok = True
        steps = [self._sync_topic_config, self._sync_consumer_offset,
                 self._sync_delay_offset, self._sync_subscription_group_config]
        if self._b.store_config.timer_wheel_enable:
            steps.append(self._sync_timer_metrics)
        for step in steps:
            try:
                await step(addr)
            except (RocketMQError, ValueError, OSError) as exc:
                ok = False
                log.warning("broker.slave_sync_failed", step=step.__name__.removeprefix("_sync_"),
                            master=addr, error=str(exc))
        self.last_sync_ok = ok
        return ok

    async def _sync_topic_config(self, addr: str) -> None:
        wrapper = TopicConfigSerializeWrapper.decode(await self._fetch(addr, RequestCode.GET_ALL_TOPIC_CONFIG))
        topics = self._b.topics
        if await _adopt(topics, topics.topic_config_table, wrapper.data_version,
                        wrapper.topic_config_table):
            log.info("broker.slave_topics_synced", master=addr, topics=len(wrapper.topic_config_table))

    async def _sync_consumer_offset(self, addr: str) -> None:
        wrapper = ConsumerOffsetSerializeWrapper.decode(
            await self._fetch(addr, RequestCode.GET_ALL_CONSUMER_OFFSET))
        self._b.offsets.offset_table.update(wrapper.offset_table)
        await self._b.offsets.persist()

    async def _sync_delay_offset(self, addr: str) -> None:
        body = await self._fetch(addr, RequestCode.GET_ALL_DELAY_OFFSET)
        schedule = self._b.schedule
        if body and schedule is not None:
            schedule.offset_table = decode_delay_offsets(body)
            await schedule.persist()

    async def _sync_subscription_group_config(self, addr: str) -> None:
        wrapper = SubscriptionGroupWrapper.decode(
            await self._fetch(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
        groups = self._b.subscription_groups
        if await _adopt(groups, groups.table, wrapper.data_version,
                        wrapper.subscription_group_table):
            log.info("broker.slave_groups_synced", master=addr, groups=len(groups.table))

    async def _sync_timer_metrics(self, addr: str) -> None:
        timer = self._b.timer
        if timer is None:
            return
        body = await self._fetch(addr, RequestCode.GET_TIMER_METRICS)
        if timer.metrics.adopt_master(body):
            log.info("broker.slave_timer_metrics_synced", master=addr, total=timer.metrics.total)


async def _adopt(manager: TopicConfigManager | SubscriptionGroupManager, table: dict[str, Any],
                 version: DataVersion, entries: dict[str, Any]) -> bool:
    """Replace ``table`` with the master's ``entries`` and persist, unless ``manager`` already
    has the master's data version; True when it replaced."""
    if manager.data_version != version:
        manager.data_version.assign_new_one(version)
        table.clear()
        table.update(entries)
        await manager.persist()
        return True
    return False
