"""A known workload for the dashboard tests, run on a private loop thread (``LoopThread``).

On open, against a real nameserver + broker:

* ``ORDERS_TOPIC`` (2 queues) gets ``ORDERS`` JSON messages keyed ``order-<i>``;
* ``BILLING_GROUP`` (offline) has consumed ``BILLING_CONSUMED`` of them: its committed
  offsets (UPDATE_CONSUMER_OFFSET, what a consumer commits) leave a lag of
  ``ORDERS - BILLING_CONSUMED``;
* ``LIVE_TOPIC`` has a running push consumer (``LIVE_GROUP``) and a running producer
  (``LIVE_PRODUCER_GROUP``) that sent ``LIVE_SENT`` messages, for the connection pages.

Everything stops on close. The browser tests run Playwright's sync API on the test thread,
so the clients live on this loop thread instead of pytest's.
"""

from __future__ import annotations

import json
import time

from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.client.producer import Producer
from aiorocketmq.client.push_consumer import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    PushConsumer,
)
from aiorocketmq.client.sync import LoopThread
from aiorocketmq.protocol.bodies import MessageQueue, SubscriptionGroupConfig, TopicConfig
from aiorocketmq.protocol.headers import UpdateConsumerOffsetRequestHeader
from aiorocketmq.protocol.message import Message, MessageExt

ORDERS_TOPIC = "DashOrders"
ORDERS = 30
ORDER_QUEUES = 2
BILLING_GROUP = "DashBilling"
BILLING_CONSUMED = 12  # 6 per queue
LIVE_TOPIC = "DashLive"
LIVE_GROUP = "DashLiveGroup"
LIVE_PRODUCER_GROUP = "DashLiveProducer"
LIVE_SENT = 5
CLUSTER = "DefaultCluster"


def order_body(i: int) -> bytes:
    return json.dumps({"order": i, "item": f"widget-{i}", "amount": i * 10}).encode()


class ConsumerThread(LoopThread):
    """A loop thread whose ``_aopen`` starts ``consumer``, a push consumer whose listener is
    ``_on_messages`` (it keeps what it was given in ``consumed``); shut down on close."""

    def __init__(self, name: str, namesrv_addr: str) -> None:
        super().__init__(name)
        self.namesrv_addr = namesrv_addr
        self.consumed: list[MessageExt] = []
        self.consumer: PushConsumer | None = None

    @property
    def consumer_client_id(self) -> str:
        assert self.consumer is not None and self.consumer.instance is not None
        return self.consumer.instance.client_id

    def _on_messages(self, msgs: list[MessageExt], _ctx: object) -> ConsumeConcurrentlyStatus:
        self.consumed.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async def _aclose(self) -> None:
        if self.consumer is not None:
            await self.consumer.shutdown()


class Workload(ConsumerThread):
    """See the module docstring; ``started_ms`` is when the first order was sent."""

    def __init__(self, namesrv_addr: str) -> None:
        super().__init__("dashboard-workload", namesrv_addr)
        self.started_ms = 0
        self.producer: Producer | None = None

    async def _aopen(self) -> None:
        async with MQAdmin(self.namesrv_addr) as admin:
            broker = (await admin.brokers(CLUSTER, masters_only=True))[0]
            for topic in (ORDERS_TOPIC, LIVE_TOPIC):
                await admin.create_topic(broker.addr, TopicConfig(
                    topic, read_queue_nums=ORDER_QUEUES, write_queue_nums=ORDER_QUEUES))
            await admin.create_subscription_group(
                broker.addr, SubscriptionGroupConfig(group_name=BILLING_GROUP))
            self.started_ms = time.time_ns() // 1_000_000 - 1000
            async with Producer("DashOrdersProducer", self.namesrv_addr) as producer:
                for i in range(ORDERS):
                    mq = MessageQueue(ORDERS_TOPIC, broker.broker_name, i % ORDER_QUEUES)
                    await producer.send(Message(ORDERS_TOPIC, order_body(i), tags="order",
                                                keys=f"order-{i}"), mq)
            for qid in range(ORDER_QUEUES):
                await admin.api.update_consumer_offset(broker.addr, UpdateConsumerOffsetRequestHeader(
                    consumer_group=BILLING_GROUP, topic=ORDERS_TOPIC, queue_id=qid,
                    commit_offset=BILLING_CONSUMED // ORDER_QUEUES, bname=broker.broker_name),
                    admin.timeout, oneway=False)
        self.producer = Producer(LIVE_PRODUCER_GROUP, self.namesrv_addr)
        await self.producer.start()
        self.consumer = PushConsumer(LIVE_GROUP, self.namesrv_addr,
                                     consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        self.consumer.subscribe(LIVE_TOPIC, "*")
        self.consumer.register_message_listener(self._on_messages)
        await self.consumer.start()
        for i in range(LIVE_SENT):
            await self.producer.send(Message(LIVE_TOPIC, f"live-{i}".encode(), keys=f"live-{i}"))

    @property
    def producer_client_id(self) -> str:
        assert self.producer is not None
        return self.producer.instance.client_id

    async def _aclose(self) -> None:
        await super()._aclose()
        if self.producer is not None:
            await self.producer.shutdown()
