"""The broker's calls to the nameservers (upstream ``BrokerOuterAPI`` + ``BrokerController.registerBrokerAll``).

Contract (docs/PROTOCOL.md 4.4, 4.11, 6.7, 6.9):

* ``register_broker_all(oneway=...)`` sends REGISTER_BROKER with the whole topic table
  (each topic carrying the broker's perm when the broker is not both readable and
  writable) to every nameserver concurrently: two-way with ``registerBrokerTimeoutMills``
  (6 s), or oneway. Header ``bodyCrc32`` is
  ``crc32(body) & 0x7fffffff``.
* ``register_topic(topic_config)``: the two-way registration carrying only that topic,
  sent after UPDATE_AND_CREATE_TOPIC (upstream ``registerIncrementBrokerData``).
* ``start()`` runs the periodic registration: first after 10 s, then every
  ``registerNameServerPeriod`` clamped to 10..60 s. The controller awaits the first
  registration itself before announcing readiness.
* ``unregister_broker_all()`` sends UNREGISTER_BROKER to every nameserver (clean shutdown).
* ``ha_server_addr`` (set by the controller once the HA port is bound) is the header's
  ``haServerAddr``; ``on_register_result(ha_server_addr, master_addr)`` receives the
  first nameserver's two-way answer (upstream ``registerBrokerResultList.get(0)``): a
  slave learns its master's HA and broker addresses from it.
* The periodic registration also hands the first answer's ``ORDER_TOPIC_CONFIG`` KV table
  (its body) to ``on_order_topic_config`` (the topic manager's ``update_order_topic_config``):
  the nameserver decides which topics are ordered, as upstream's ``checkOrderConfig``.
* Failures are logged once per nameserver per attempt and never raised: a broker keeps
  serving while a nameserver is down.
* ``request_register_oneway()`` may be called from plain handlers (a topic was
  auto-created): it starts one task owned by this object (coalesced while one is
  pending) that registers the whole table; ``stop()`` awaits it. Upstream writes that
  registration oneway (``registerBrokerAll(false, true, true)``); ours waits for the
  nameserver's answer, so the route is in the nameserver's table, not only on its way.
* ``after_registration(result)``: a handler's result held back until that pending
  registration is answered (at most ``registerBrokerTimeoutMills``), as upstream registers
  inside the request that auto-created a topic before the send is answered. A client that
  asks the nameserver for the route right after its first send then finds the new topic.
"""

from __future__ import annotations

import asyncio
import inspect
import ssl
import zlib
from collections.abc import Awaitable, Callable, Iterable

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.bodies import (
    KVTable,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from aiorocketmq.protocol.codes import Perm, RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import ProtocolError, RocketMQError
from aiorocketmq.protocol.headers import (
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
)
from aiorocketmq.protocol.remoting_client import RemotingClient
from aiorocketmq.protocol.routine import Routine

from .config import BrokerConfig

__all__ = ["BrokerOuterAPI", "FIRST_REGISTER_DELAY"]

log = get_logger("aiorocketmq.broker.namesrv")

FIRST_REGISTER_DELAY = 10.0  # BrokerController.start: scheduleAtFixedRate(..., 1000 * 10, period)
ONEWAY_PERMIT_TIMEOUT = 3.0

_Result = RemotingCommand | None | Awaitable[RemotingCommand | None]


class BrokerOuterAPI:
    """Registration of this broker with every configured nameserver."""

    def __init__(self, config: BrokerConfig,
                 build_wrapper: Callable[[], TopicConfigSerializeWrapper], *,
                 ssl: ssl.SSLContext | None = None) -> None:
        self._config = config
        self._build_wrapper = build_wrapper
        self._client = RemotingClient(ssl=ssl)  # -Dtls.enable=true: TLS to nameservers
        self._client.update_namesrv_address_list(config.namesrv_addr_list)
        self._periodic = Routine(self._register_routine, "registerBrokerAll")
        self._oneway_task: asyncio.Task[None] | None = None
        self._oneway_again = False
        self.ha_server_addr: str | None = None
        self.on_register_result: Callable[[str | None, str | None], None] | None = None
        self.on_order_topic_config: Callable[[Iterable[str]], object] | None = None

    @property
    def namesrv_addrs(self) -> list[str]:
        return self._config.namesrv_addr_list

    # -- bodies -----------------------------------------------------------------------------

    def _capped(self, wrapper: TopicConfigSerializeWrapper) -> TopicConfigSerializeWrapper:
        perm = self._config.broker_permission
        if Perm.readable(perm) and Perm.writeable(perm):
            return wrapper
        table = {name: TopicConfig(name, tc.read_queue_nums, tc.write_queue_nums, perm)
                 for name, tc in wrapper.topic_config_table.items()}
        return TopicConfigSerializeWrapper(table, wrapper.data_version)

    def _request(self, body: bytes) -> RemotingCommand:
        c = self._config
        header = RegisterBrokerRequestHeader(
            broker_name=c.broker_name, broker_addr=c.broker_addr,
            cluster_name=c.broker_cluster_name,
            ha_server_addr=self.ha_server_addr or c.ha_server_addr,
            broker_id=c.broker_id, compressed=c.compressed_register,
            body_crc32=zlib.crc32(body) & 0x7FFFFFFF)
        return RemotingCommand.create_request(RequestCode.REGISTER_BROKER,
                                              header.to_ext_fields(), body)

    # -- registration ---------------------------------------------------------------------

    async def register_broker_all(self, *, oneway: bool = False,
                                  wrapper: TopicConfigSerializeWrapper | None = None,
                                  check_order_config: bool = False) -> int:
        """Register with every nameserver; the number that accepted (oneway: that were sent).
        ``check_order_config`` (the periodic registration, as upstream's
        ``registerBrokerAll(true, ...)``): the first answer's ``ORDER_TOPIC_CONFIG`` table, when
        it carries one, goes to ``on_order_topic_config``."""
        addrs = self.namesrv_addrs
        if not addrs:
            return 0
        wrapper = self._capped(self._build_wrapper() if wrapper is None else wrapper)
        body = RegisterBrokerBody(wrapper, []).encode(compressed=self._config.compressed_register)
        results = await asyncio.gather(*(self._register_one(a, body, oneway) for a in addrs))
        answered = [r for r in results if isinstance(r, RemotingCommand)]
        if answered and self.on_register_result is not None:
            h = RegisterBrokerResponseHeader.from_ext_fields(answered[0].ext_fields or {})
            self.on_register_result(h.ha_server_addr, h.master_addr)
        if check_order_config and answered and answered[0].body \
                and self.on_order_topic_config is not None:
            try:
                table = KVTable.decode(answered[0].body).table
            except ProtocolError as exc:
                log.warning("broker.register_order_conf_unreadable", error=str(exc))
            else:
                self.on_order_topic_config(table.keys())
        return sum(1 for r in results if r is not False)

    async def _register_one(self, addr: str, body: bytes, oneway: bool) -> bool | RemotingCommand:
        request = self._request(body)
        timeout = self._config.register_broker_timeout_ms / 1000
        try:
            if oneway:
                await self._client.invoke_oneway(addr, request, ONEWAY_PERMIT_TIMEOUT)
                return True
            response = await self._client.invoke(addr, request, timeout)
        except RocketMQError as exc:
            log.warning("broker.register_failed", namesrv=addr, oneway=oneway, error=str(exc))
            return False
        if response.code != ResponseCode.SUCCESS:
            log.warning("broker.register_refused", namesrv=addr, code=response.code,
                        remark=response.remark)
            return False
        log.debug("broker.registered", namesrv=addr)
        return response

    async def register_topic(self, tc: TopicConfig,
                             wrapper: TopicConfigSerializeWrapper) -> int:
        """Two-way registration carrying only ``tc`` (with ``wrapper``'s DataVersion)."""
        single = TopicConfigSerializeWrapper({tc.topic_name: tc}, wrapper.data_version)
        return await self.register_broker_all(wrapper=single)

    def request_register_oneway(self) -> None:
        """Full oneway registration soon (after an auto-created topic); coalesced."""
        if self._oneway_task is not None:
            self._oneway_again = True
            return
        self._oneway_task = asyncio.get_running_loop().create_task(self._oneway_routine())

    def after_registration(self, result: _Result) -> _Result:
        """``result`` unchanged when no oneway registration is pending, else an awaitable
        that answers with it once the registration was written (module docstring)."""
        task = self._oneway_task
        if task is None:
            return result
        return self._answer_after(task, result)

    async def _answer_after(self, task: asyncio.Task[None], result: _Result
                            ) -> RemotingCommand | None:
        try:
            async with asyncio.timeout(self._config.register_broker_timeout_ms / 1000):
                await asyncio.shield(task)
        except TimeoutError:
            log.warning("broker.register_slow", timeout_ms=self._config.register_broker_timeout_ms)
        except Exception:
            pass  # the routine logs its own failures; the answer goes out regardless
        return await result if inspect.isawaitable(result) else result

    async def _oneway_routine(self) -> None:
        try:
            while True:
                self._oneway_again = False
                # Two-way: the nameserver answers once the topic is in its routes. Upstream
                # writes this one oneway, and then a client that asks the nameserver at once
                # can overtake it (seen under load on two cores).
                await self.register_broker_all(oneway=False)
                if not self._oneway_again:
                    break
        finally:
            self._oneway_task = None

    async def unregister_broker_all(self) -> None:
        c = self._config
        header = UnRegisterBrokerRequestHeader(
            broker_name=c.broker_name, broker_addr=c.broker_addr,
            cluster_name=c.broker_cluster_name, broker_id=c.broker_id)
        timeout = self._config.register_broker_timeout_ms / 1000

        async def one(addr: str) -> None:
            request = RemotingCommand.create_request(RequestCode.UNREGISTER_BROKER,
                                                     header.to_ext_fields())
            try:
                response = await self._client.invoke(addr, request, timeout)
            except RocketMQError as exc:
                log.warning("broker.unregister_failed", namesrv=addr, error=str(exc))
                return
            log.info("broker.unregistered", namesrv=addr, code=response.code)

        await asyncio.gather(*(one(a) for a in self.namesrv_addrs))

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        self._periodic.start()

    async def _register_routine(self) -> None:
        await asyncio.sleep(FIRST_REGISTER_DELAY)
        period = self._config.register_period_ms / 1000
        while True:
            await self.register_broker_all(check_order_config=True)
            await asyncio.sleep(period)

    async def stop(self) -> None:
        """Stop the periodic registration and finish a pending oneway one; keep the client."""
        await self._periodic.stop()
        oneway = self._oneway_task
        if oneway is not None:
            await oneway

    async def close(self) -> None:
        await self.stop()
        await self._client.close()
