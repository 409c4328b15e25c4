"""``BrokerController``: builds and wires every broker component, starts and stops them in order.

Upstream ``BrokerController`` (``initialize``, ``start``, ``shutdown``, ``registerBrokerAll``).

``start()``:

1. load ``topics.json``, ``subscriptionGroup.json``, ``consumerOffset.json``; with
   ``aclEnable``, load the ACL files (server/broker/acl/, upstream ``initialAcl``) and put
   the check in front of every request (the server's request hook) before anyone connects;
   the ACL files are then watched for changes;
2. bind the RemotingServer's port without listening yet (``listenPort`` 0 picks a free
   port, which then becomes ``listen_port``, the registered broker address and the store
   host);
3. start the store (recovery included) and hook its message-arriving listener to the
   long-polling service;
4. register the processor table (admin as default processor for unknown codes), every
   handler behind the edge its request spec describes (``protocol/request_specs.py``):
   the checks of ``protocol.validation`` (a refused request is answered SYSTEM_ERROR with
   a remark naming the field, and changes nothing), the request header decoded once from
   the spec's class for the handler (a bad one answered SYSTEM_ERROR with the decoder's
   remark; not for the sends, whose processor decodes its own fast way) and, for codes that may create a topic
   (sends, a send-back's retry or DLQ topic, a heartbeat's retry topics), an answer that
   waits for the new topic's registration with the nameservers, as upstream's;
5. start the persistence routines, client housekeeping and long-poll checker; attach the
   metrics families and start their HTTP endpoint (``metrics``: server/metrics/); then
   listen: clients connect only to a broker that can answer them (upstream starts its
   remoting server after the store has loaded and recovered);
6. register with every nameserver (awaited, failures logged), then the periodic
   registration and the 5 s consumer-offset flush.

Replication (upstream's master/slave, ``brokerRole``): right after the store, the HA
service (``server/store/ha``) listens on ``haListenPort`` (listenPort + 1; any free port
when listenPort is 0) and is registered as ``haServerAddr``. A master's brokerId is 0
(``BrokerStartup``); a SLAVE needs brokerId > 0, follows ``haMasterAddress`` or else the
master's HA address from the nameserver's answer, copies the master's metadata every 10 s
(``slave_sync``), and runs neither the delay-level delivery nor the transaction check.

DLedger mode (``enableDLegerCommitLog=true``, ``server/store/dledger``): the store is a
``DLedgerMessageStore`` listening on its own ``dLegerPeers`` address (that host and port,
whatever ``--host`` says); no HA port. ``brokerId`` and
``brokerRole`` of the config are ignored: the broker starts as a SLAVE registered with
brokerId = ``dLegerSelfId``'s digits + 1, and ``dledger_role.py`` turns it into the master
(brokerId 0, SYNC_MASTER) while its Raft node leads, once caught up. Timer messages: the
timer store runs on the leader only, loaded when it becomes the master (``dledger_role.py``).

Timer messages (``server/store/timer``): one ``TimerMessageStore`` per broker; its check is a
store put hook and a send hook; with ``timerWheelEnable`` the topic ``rmq_sys_wheel_timer``
(1 queue) is registered and a master loads and starts the timer store after the store,
and stops it before the store.

``shutdown()`` (idempotent): stop accepting connections and drain running handlers
(bounded), stop the metrics endpoint, answer parked pulls, stop the periodic tasks, unregister from
the nameservers, stop accepting and close client connections, persist offsets, topics and
groups, shut the store down (flush + checkpoint), close the nameserver client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping, Sequence
from pathlib import Path

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.channel import Channel, Handler
from aiorocketmq.protocol.codes import ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.remoting_server import RemotingServer
from aiorocketmq.protocol.request_specs import broker_specs, edge_check, edge_header
from aiorocketmq.protocol.routine import Routine, ServiceState
from aiorocketmq.protocol.tls import TlsConfig
from aiorocketmq.protocol.validation import guard
from aiorocketmq.server.metrics import BrokerMetrics
from aiorocketmq.server.store.config import MessageStoreConfig
from aiorocketmq.server.store.dledger.store import DLedgerMessageStore
from aiorocketmq.server.store.ha import HAService
from aiorocketmq.server.store.inner import MessageExtBrokerInner
from aiorocketmq.server.store.message_store import MessageStore
from aiorocketmq.server.store.timer import TIMER_TOPIC, TimerMessageStore, TimerSendHook

from .acl import AclFileWatcher, PlainAccessValidator, load_access_validator
from .acl.processor import AclAdminProcessor
from .client_manager import ClientHousekeeping, ConsumerManager, ProducerManager
from .config import BrokerConfig
from .consumer_offset import ConsumerOffsetManager
from .dledger_role import DLedgerRoleChangeHandler
from .filter import ConsumerFilterManager
from .long_polling import PullRequestHoldService
from .namesrv_api import BrokerOuterAPI
from .processors import admin_broker, admin_group
from .processors.admin import AdminBrokerProcessor
from .processors.client_manage import ClientManageProcessor
from .processors.consumer_manage import ConsumerManageProcessor
from .processors.end_transaction import EndTransactionProcessor
from .processors.lock import LockProcessor
from .processors.pull import PullMessageProcessor
from .processors.query import QueryProcessor
from .processors.reply import ReplyMessageProcessor
from .processors.send import SendMessageProcessor
from .processors.send_back import RetryDlqSendHook, SendBackProcessor
from .rebalance_lock import RebalanceLockManager
from .schedule import ScheduleMessageService
from .slave_sync import SlaveSynchronize
from .stats import BrokerStatsManager
from .subscription_group import SubscriptionGroupManager
from .topic_config import TopicConfigManager
from .transaction import (
    TransactionalMessageCheckService,
    TransactionalMessageService,
    TransactionPrepareHook,
)

__all__ = ["BrokerController"]

log = get_logger("aiorocketmq.broker")

async def _shutdown_step(what: str, step: Awaitable[object]) -> None:
    """Await one shutdown step; a failure is logged and the shutdown goes on."""
    try:
        await step
    except asyncio.CancelledError:
        if not isinstance(step, asyncio.Task):
            raise  # our own cancellation; a cancelled task we awaited is expected
    except Exception:
        log.exception("broker.shutdown_step_failed", step=what)


def _log_refused(channel: Channel, request: RemotingCommand, remark: str) -> None:
    log.warning("broker.request_refused", peer=channel.remote_addr, code=request.code,
                opaque=request.opaque, reason=remark[:300])


class BrokerController:
    """One broker process's components; see the module docstring for the order of things."""

    def __init__(self, config: BrokerConfig, store_config: MessageStoreConfig, *,
                 host: str = "127.0.0.1", metrics: BrokerMetrics | None = None,
                 system_properties: dict[str, str] | None = None,
                 config_path: str | None = None) -> None:
        self.config = config
        # The -c file (BrokerPathConfigHelper.setBrokerConfigPath): UPDATE_BROKER_CONFIG
        # persists the whole configuration there; None (no -c): changes last until a restart.
        self.config_path = config_path
        self.requested_listen_port = config.listen_port  # 0 stays 0 in the persisted file
        # Upstream's JVM -D properties: rocketmq.home.dir, rocketmq.acl.plain.file, tls.*
        self.system_properties = dict(system_properties or {})
        self.tls = TlsConfig.from_properties(self.system_properties)
        self.store_config = store_config
        self.host = host
        root = Path(store_config.store_path_root_dir)
        self.topics = TopicConfigManager(config, root)
        if store_config.timer_wheel_enable:
            self.topics.add_system_topic(TIMER_TOPIC, 1)
        self.subscription_groups = SubscriptionGroupManager(
            root, auto_create=config.auto_create_subscription_group)
        self.offsets = ConsumerOffsetManager(root)
        self.consumer_filters = ConsumerFilterManager(root)
        self.producers = ProducerManager()
        self.consumers = ConsumerManager(notify_enable=config.notify_consumer_ids_changed_enable)
        self.consumers.filters = self.consumer_filters
        self.housekeeping = ClientHousekeeping(self.producers, self.consumers)
        self.rebalance_locks = RebalanceLockManager()
        self.stats = BrokerStatsManager(config.broker_cluster_name)
        # Without options: no endpoint, slow requests (1 s) still logged.
        self.metrics = metrics if metrics is not None else BrokerMetrics()
        # One context for both ports, as upstream's two servers share one TLS setup.
        self._server_ssl = self.tls.maybe_server_context()
        self.server = RemotingServer(host=host, port=config.listen_port,
                                     default_handler=self._not_ready,
                                     on_channel_close=self._on_channel_close,
                                     request_observer=self.metrics.observer,
                                     ssl_context=self._server_ssl, tls_mode=self.tls.mode)
        self.namesrv = BrokerOuterAPI(config, self.topics.build_serialize_wrapper,
                                      ssl=self.tls.client_context() if self.tls.enable else None)
        self.topics.on_topic_created = self.namesrv.request_register_oneway
        self.namesrv.on_order_topic_config = self.topics.update_order_topic_config
        self.store: MessageStore = None  # type: ignore[assignment]  # created in start()
        self.pull_hold: PullRequestHoldService = None  # type: ignore[assignment]
        self.send_processor: SendMessageProcessor | None = None
        self.pull_processor: PullMessageProcessor | None = None
        self.admin_processor: AdminBrokerProcessor | None = None
        self.schedule: ScheduleMessageService | None = None
        self.timer: TimerMessageStore | None = None
        self.transactions: TransactionalMessageService | None = None
        self.transaction_check: TransactionalMessageCheckService | None = None
        self._offset_routine = Routine(self._persist_offsets_routine, "persistConsumerOffset")
        self.ha: HAService | None = None
        self.slave_sync = SlaveSynchronize(self)
        self.fast_server: RemotingServer | None = None  # listenPort - 2, upstream's VIP channel
        self.access_validator: PlainAccessValidator | None = None
        self.acl_watcher: AclFileWatcher | None = None
        self.dledger_roles: DLedgerRoleChangeHandler | None = None
        self._specs = broker_specs()
        self._state = ServiceState.CREATE_JUST

    @property
    def broker_addr(self) -> str:
        return self.config.broker_addr

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        if self._state is not ServiceState.CREATE_JUST:
            raise RuntimeError(f"BrokerController.start(): broker is {self._state.name}")
        self._state = ServiceState.START_FAILED  # until it gets to the end, as upstream
        dledger = self.store_config.is_dledger
        if dledger:
            self.store_config.broker_role = "SLAVE"  # until elected and caught up
        elif self.store_config.is_slave:
            if self.config.broker_id <= 0:
                raise RuntimeError("Slave's brokerId must be > 0")
        else:
            self.config.broker_id = 0  # BrokerStartup: MixAll.MASTER_ID
        requested_port = self.config.listen_port
        for manager in (self.topics, self.subscription_groups, self.offsets, self.consumer_filters):
            if not manager.load():
                raise RuntimeError(f"cannot load {manager.path} nor its .bak")
        if self.config.acl_enable:
            self.access_validator = load_access_validator(self.system_properties)
            self.server.request_hook = self.access_validator.before_request
            self.acl_watcher = AclFileWatcher(self.access_validator.manager)
        await self.server.start(serve=False)
        self.config.listen_port = self.server.port
        c = self.config
        if dledger:
            store = DLedgerMessageStore(self.store_config, store_host=c.broker_addr,
                                        broker_name=c.broker_name,
                                        broker_cluster=c.broker_cluster_name)
            c.broker_id = store.follower_broker_id
            self.dledger_roles = DLedgerRoleChangeHandler(self, store)
            store.on_role_change = self.dledger_roles.handle
            self.store = store
            await self.store.start()
            self.namesrv.on_register_result = self._on_register_result
        else:
            self.store = MessageStore(self.store_config, store_host=c.broker_addr,
                                      broker_name=c.broker_name, broker_cluster=c.broker_cluster_name)
            # A batch's queue units and index entries are written after its answer
            # (upstream's ReputMessageService dispatches after the put returns).
            self.store.defer_batch_dispatch = True
            await self.store.start()
            await self._start_ha(requested_port)
        self.pull_processor = PullMessageProcessor(self)
        self.pull_hold = PullRequestHoldService(
            wakeup=self.pull_processor.execute_request_when_wakeup,
            max_offset=self.store.get_max_offset_in_queue,
            long_polling_enable=c.long_polling_enable,
            short_polling_time_ms=c.short_polling_time_ms,
            max_per_queue=c.max_suspended_pulls_per_queue,
            max_total=c.max_suspended_pulls)
        self.store.set_message_arriving_listener(self._on_message_arriving,
                                                 self._on_batch_arriving)
        self.timer = TimerMessageStore(self.store, self.store_config)
        self.store.put_message_hooks.append(self.timer.check_and_transform)
        if self.store_config.timer_wheel_enable and not self.store_config.is_slave:
            self.timer.load()
        self.schedule = ScheduleMessageService(self.store, self.store_config.store_path_root_dir)
        if not self.schedule.load():
            raise RuntimeError(f"cannot load {self.schedule.path} nor its .bak")
        self.transactions = TransactionalMessageService(self)
        self.transaction_check = TransactionalMessageCheckService(self, self.transactions)
        self.send_processor = SendMessageProcessor(self)
        # handleRetryAndDLQ runs before the transactional prepare, as upstream.
        self.send_processor.hooks += [RetryDlqSendHook(self), TransactionPrepareHook(),
                                      TimerSendHook(self.timer, c.broker_name)]
        self.admin_processor = AdminBrokerProcessor(self)
        acl_admin = AclAdminProcessor(self.access_validator, lambda: (
            self.config.broker_name, self.config.broker_addr, self.config.broker_cluster_name))
        for processor in (self.send_processor, self.pull_processor,
                          QueryProcessor(self), ClientManageProcessor(self),
                          ConsumerManageProcessor(self), self.admin_processor,
                          SendBackProcessor(self), LockProcessor(self),
                          EndTransactionProcessor(self, self.transactions),
                          ReplyMessageProcessor(self), self.schedule, acl_admin):
            self._register(processor.handlers())
        for table in (admin_broker.handlers(self), admin_group.handlers(self)):
            self._register(table)
        self.server.register_default(self.admin_processor.unknown)
        for manager in (self.topics, self.subscription_groups, self.offsets, self.consumer_filters):
            manager.start()
        self.housekeeping.start()
        self.pull_hold.start()
        if self.store_config.is_slave:
            self.slave_sync.start()
        else:
            self.schedule.start()
            self.transaction_check.start()
            if self.store_config.timer_wheel_enable:
                self.timer.start()
        if self.acl_watcher is not None:
            self.acl_watcher.start()
        self.metrics.attach(self)
        await self.metrics.start()
        await self.server.start_serving()
        await self._start_fast_server(requested_port)
        await self.namesrv.register_broker_all()
        self.namesrv.start()
        if self.dledger_roles is not None:
            self.dledger_roles.start()
        self._offset_routine.start()
        self._state = ServiceState.RUNNING
        log.info("broker.started", broker=c.broker_name, addr=c.broker_addr,
                 namesrv=c.namesrv_addr, metrics=self.metrics.address)

    def _register(self, table: Mapping[int, Handler]) -> None:
        """Register a processor's handlers, each behind the edge its request spec describes
        (``protocol/request_specs.py``): the field and body checks, the header decoded once
        into ``request.header`` (``edge_header``), and for a code that may create a topic,
        an answer that waits for the topic's registration. The spec is bound here, once: a
        request costs the processor table's dict access."""
        specs = self._specs
        for code, handler in table.items():
            spec = specs.get(code)
            if spec is not None and spec.may_create_topic:
                handler = self._answered_after_registration(handler)
            self.server.register(code, guard(handler, edge_check(spec), _log_refused,
                                             edge_header(spec)))

    def _answered_after_registration(self, handler: Handler) -> Handler:
        """``handler`` whose answer waits for the registration of a topic it auto-created
        (``BrokerOuterAPI.after_registration``)."""
        after = self.namesrv.after_registration

        def answered(channel: Channel, request: RemotingCommand
                     ) -> RemotingCommand | None | Awaitable[RemotingCommand | None]:
            return after(handler(channel, request))

        answered.__name__ = getattr(handler, "__name__", "answered")
        answered.__wrapped__ = handler  # type: ignore[attr-defined]  # inspect.unwrap finds it
        return answered

    async def _start_ha(self, requested_port: int) -> None:
        sc = self.store_config
        if sc.ha_listen_port is not None:
            port = sc.ha_listen_port
        else:
            port = requested_port + 1 if requested_port else 0
        self.ha = HAService(self.store)
        self.store.ha = self.ha
        await self.ha.start(self.host, port)
        self.namesrv.ha_server_addr = f"{self.config.broker_ip2}:{self.ha.port}"
        self.namesrv.on_register_result = self._on_register_result

    async def _start_fast_server(self, requested_port: int) -> None:
        """Upstream's fastRemotingServer on listenPort - 2 (the "VIP channel"): stock brokers
        call a master there (a stock slave's SlaveSynchronize uses ``brokerVIPChannel``).
        Not with listenPort 0, and only a warning when the port is taken."""
        if requested_port <= 2:
            return
        fast = RemotingServer(self.server.processors, host=self.host, port=requested_port - 2,
                              default_handler=self.admin_processor.unknown if self.admin_processor else None,
                              on_channel_close=self._on_channel_close,
                              request_observer=self.metrics.observer,
                              request_hook=self.server.request_hook,
                              ssl_context=self._server_ssl, tls_mode=self.tls.mode)
        try:
            await fast.start()
        except OSError as exc:
            log.warning("broker.fast_port_unavailable", port=requested_port - 2, error=str(exc))
            await fast.stop()
            return
        self.fast_server = fast

    def _on_register_result(self, ha_server_addr: str | None, master_addr: str | None) -> None:
        """``doRegisterBrokerAll``: a slave follows the master the nameserver names."""
        if not self.store_config.is_slave:
            return
        fixed = self.store_config.ha_master_address
        if self.ha is not None and ha_server_addr and not (fixed and len(fixed) >= 6):
            self.ha.update_master_address(ha_server_addr)
        self.slave_sync.master_addr = master_addr

    def _not_ready(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return request.create_response(ResponseCode.SYSTEM_BUSY,
                                       "[STARTING]broker is starting, try again later")

    def _on_message_arriving(self, topic: str, queue_id: int, max_offset: int, tags_code: int,
                             store_timestamp: int, properties: dict[str, str]) -> None:
        if self.config.long_polling_enable:
            self.pull_hold.notify_message_arriving(topic, queue_id, max_offset, tags_code, properties)
        if self.schedule is not None:
            self.schedule.notify_message_arriving(topic, queue_id)
        if self.timer is not None:
            self.timer.notify_message_arriving(topic, queue_id)

    def _on_batch_arriving(self, topic: str, queue_id: int,
                           members: Sequence[MessageExtBrokerInner]) -> None:
        """``_on_message_arriving`` for a batch's members: parked pulls of the queue are
        offered each member (their filters decide), the delay and timer services are woken
        once."""
        if self.config.long_polling_enable and self.pull_hold.is_waiting(topic, queue_id):
            notify = self.pull_hold.notify_message_arriving
            for m in members:
                notify(topic, queue_id, m.queue_offset + 1, m.tags_code, m.properties)
        if self.schedule is not None:
            self.schedule.notify_message_arriving(topic, queue_id)
        if self.timer is not None:
            self.timer.notify_message_arriving(topic, queue_id)

    def _on_channel_close(self, channel: Channel, exc: BaseException | None) -> None:
        self.producers.on_channel_close(channel)
        self.consumers.on_channel_close(channel)
        if self.send_processor is not None:
            self.send_processor.forget_channel(channel)
        if self.pull_hold is not None:
            self.pull_hold.drop_channel(channel)

    async def _persist_offsets_routine(self) -> None:
        interval = self.config.flush_consumer_offset_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.offsets.persist()
            except Exception as exc:
                # The routine must outlive one failed write: the next period retries it.
                log.error("broker.offset_persist_failed", path=str(self.offsets.path),
                          error=f"{exc.__class__.__name__}: {exc}")

    async def shutdown(self) -> None:
        """Stop everything in order (see the module docstring). Idempotent."""
        if self._state is ServiceState.SHUTDOWN_ALREADY:
            return
        started = self._state is ServiceState.RUNNING
        self._state = ServiceState.SHUTDOWN_ALREADY
        # Stop accepting, then let running handlers (SYNC_FLUSH sends awaiting their group
        # commit) answer while the store still runs; bounded by the flush timeout.
        self.server.stop_accepting()
        await self.server.drain(max(self.store_config.sync_flush_timeout_ms,
                                    self.store_config.slave_timeout_ms) / 1000 + 1.0)
        await self.metrics.stop()
        # From here on every step runs even when an earlier one failed (logged): the
        # metadata files get written and the store closes, which removes the abort file.
        await _shutdown_step("persistConsumerOffset", self._offset_routine.stop())
        if self.acl_watcher is not None:
            await _shutdown_step("acl_watcher", self.acl_watcher.stop())
        if self.pull_hold is not None:
            await _shutdown_step("pull_hold", self.pull_hold.stop())
        if self.dledger_roles is not None:
            await _shutdown_step("dledger_roles", self.dledger_roles.stop())
        await _shutdown_step("namesrv", self.namesrv.stop())
        if started:
            await _shutdown_step("unregister", self.namesrv.unregister_broker_all())
        await _shutdown_step("housekeeping", self.housekeeping.stop())
        await _shutdown_step("slave_sync", self.slave_sync.stop())
        if self.fast_server is not None:
            await _shutdown_step("fast_server", self.fast_server.stop())
        if started or self.server.is_serving:  # not a server that never bound its port
            await _shutdown_step("server", self.server.stop())
        await _shutdown_step("consumers", self.consumers.stop())
        # Before the offsets are written: the check pass moves CID_RMQ_SYS_TRANS offsets.
        if self.transaction_check is not None:
            await _shutdown_step("transaction_check", self.transaction_check.stop())
        # After a failed start, only what started is stopped and written: the rest holds what
        # it loaded, and writing it would fail again for the reason the start did (a store
        # directory that cannot be created), a traceback each before main's one-line error.
        if self.schedule is not None and (started or self.schedule.started):
            await _shutdown_step(str(self.schedule.path), self.schedule.stop())
        if self.timer is not None:
            await _shutdown_step("timer", self.timer.shutdown())
        for manager in (self.offsets, self.topics, self.subscription_groups, self.consumer_filters):
            if started or manager.started:
                await _shutdown_step(str(manager.path), manager.stop())
        if self.ha is not None:
            await _shutdown_step("ha", self.ha.stop())
        if self.store is not None:
            await _shutdown_step("store", self.store.shutdown())
        await _shutdown_step("namesrv_client", self.namesrv.close())
        log.info("broker.stopped", broker=self.config.broker_name)
