"""``DLedgerServer``: a ``RaftNode`` on the network (the only I/O of the Raft part).

Contract:

* ``start()`` listens on this member's ``dLegerPeers`` address (its port, on ``host``) with
  a ``RemotingServer`` whose handlers decode each DLedger request (protocol.py), check its
  group and ``remoteId`` (UNKNOWN_GROUP / UNKNOWN_MEMBER otherwise, as
  ``DLedgerServer.handle*``), pass it to the node and answer at once with remoting code
  200 and the response body. Handlers are plain functions, so one connection's requests
  are handled in arrival order (a leader's pipelined pushes stay in order).
* Requests the node wants sent go through one ordered queue per peer to a
  ``RemotingClient`` (3 s timeout); a transport failure or timeout comes back to the node
  as a None response. A timer ticks the node every ``tick_ms`` (10 ms, upstream's
  ``StateMaintainer`` loop); appends are pushed on the next loop iteration, so the appends
  of one burst travel in one batch.
* ``append(size, make_body)`` (leader only) returns the entry and a future of its
  ``DLedgerResponseCode``: SUCCESS once committed, WAIT_QUORUM_ACK_TIMEOUT after
  ``max_wait_ack_ms`` (2.5 s), TERM_CHANGED when this node stops leading first (the entry
  may still be committed by the next leader: the caller must treat it as unknown).
  Raises ``RaftError`` (NOT_LEADER, LEADER_PENDING_FULL, ...), ``LogError`` or ``OSError``.
* ``on_commit(index)`` and ``on_role_change(term, role)`` (set by the owner) are called
  from inside the node's step, before append futures are completed.
* LEADERSHIP_TRANSFER is handled by a coroutine: it answers when the node has the answer
  (the transferee's decision), at most ``rpc_timeout_ms`` + the transferee's catch-up wait
  later (TIMEOUT then). ``transfer_leadership(transferee)`` starts one from this leader.
* A closed connection that carried the leader's heartbeats or pushes is reported to the
  node (``leader_connection_lost``: its follower then stands after 2 s without news
  instead of 3 s), and the leader's address is tried once: anything but an answer or a
  timeout (refused, reset) means the process is gone and the follower stands at once
  (``leader_unreachable``).
* ``stop()`` stops listening, the timer and the client; pending appends fail (TERM_CHANGED).

Upstream: ``DLedgerRpcNettyService``, ``DLedgerServer`` (dledger 0.3.1.2).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.channel import Channel
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.dledger.entry import DLedgerEntry
from aiorocketmq.protocol.dledger.wire import (
    DLedgerRequestCode,
    DLedgerResponseCode,
    GetEntriesRequest,
    GetEntriesResponse,
    HeartBeatRequest,
    LeadershipTransferRequest,
    LeadershipTransferResponse,
    MetadataRequest,
    MetadataResponse,
    ProtocolBodyError,
    PushEntryRequest,
    RequestOrResponse,
    VoteRequest,
    decode_body,
    encode_body,
    request_types,
)
from aiorocketmq.protocol.errors import RemotingTimeoutError, RocketMQError
from aiorocketmq.protocol.remoting_client import RemotingClient
from aiorocketmq.protocol.remoting_server import RemotingServer
from aiorocketmq.protocol.routine import cancel_and_wait

from .core import MakeBody, RaftNode
from .member_state import Role

__all__ = ["DLedgerServer", "CODE_OF"]

log = get_logger("aiorocketmq.store.dledger")

C = DLedgerResponseCode
CODE_OF: dict[type[RequestOrResponse], int] = {
    VoteRequest: DLedgerRequestCode.VOTE,
    HeartBeatRequest: DLedgerRequestCode.HEART_BEAT,
    PushEntryRequest: DLedgerRequestCode.PUSH,
    LeadershipTransferRequest: DLedgerRequestCode.LEADERSHIP_TRANSFER,
}


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class DLedgerServer:
    """See the module docstring."""

    def __init__(self, node: RaftNode, *, host: str = "127.0.0.1", tick_ms: float = 10.0,
                 max_wait_ack_ms: float = 2500.0) -> None:
        self.node = node
        self.host = host
        self.tick_ms = tick_ms
        self.max_wait_ack_ms = max_wait_ack_ms
        self.on_commit: Callable[[int], None] | None = None
        self.on_role_change: Callable[[int, Role], None] | None = None
        self._server: RemotingServer | None = None
        self._client: RemotingClient | None = None
        self._queues: dict[str, asyncio.Queue[RequestOrResponse]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._waiters: dict[int, tuple[int, asyncio.Future[int], float]] = {}
        self._kick_scheduled = False
        self._stopped = False
        self._transfer_waiters: dict[int, asyncio.Future[LeadershipTransferResponse]] = {}
        self._leader_channels: dict[Channel, str] = {}  # connection -> the leader it carried
        node.commit_listener = self._committed
        node.role_listener = self._role_changed
        node.transfer_listener = self._transfer_answered

    @property
    def port(self) -> int:
        return int(self.node.state.self_addr.rsplit(":", 1)[1])

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        server = RemotingServer(host=self.host, port=self.port, default_handler=self._unsupported,
                                on_channel_close=self._channel_closed)
        for code in DLedgerRequestCode:
            server.register(int(code), self._handle)
        server.register(int(DLedgerRequestCode.LEADERSHIP_TRANSFER), self._handle_transfer)
        await server.start()
        self._server = server
        self._client = RemotingClient(connect_timeout=3.0)
        loop = asyncio.get_running_loop()
        for peer in self.node.state.other_peers:
            queue: asyncio.Queue[RequestOrResponse] = asyncio.Queue()
            self._queues[peer] = queue
            self._tasks.append(loop.create_task(self._sender(peer, queue), name=f"dledger-push-{peer}"))
        self._tasks.append(loop.create_task(self._tick_routine(), name="dledger-state-maintainer"))
        log.info("dledger.listening", self_id=self.node.state.self_id, addr=f"{self.host}:{server.port}",
                 group=self.node.state.group, peers=self.node.state.peers)

    async def stop(self) -> None:
        """Stop serving and sending; pending appends fail with TERM_CHANGED. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(tasks)
        self._fail_waiters(C.TERM_CHANGED)
        for fut in self._transfer_waiters.values():
            if not fut.done():
                fut.cancel()
        self._transfer_waiters.clear()
        if self._server is not None:
            await self._server.stop()
        if self._client is not None:
            await self._client.close()

    # ------------------------------------------------------------------ appends

    def append(self, size: int, make_body: MakeBody) -> tuple[DLedgerEntry, asyncio.Future[int]]:
        now = _now_ms()
        entry = self.node.append(size, make_body, now)
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        if entry.index <= self.node.committed_index:  # a group of one
            fut.set_result(C.SUCCESS)
        else:
            self._waiters[entry.index] = (entry.term, fut, now + self.max_wait_ack_ms)
        self._kick()
        return entry, fut

    def _kick(self) -> None:
        """Tick (and so push) on the next loop iteration, once for a burst of appends."""
        if not self._kick_scheduled and not self._stopped:
            self._kick_scheduled = True
            asyncio.get_running_loop().call_soon(self._kicked)

    def _kicked(self) -> None:
        self._kick_scheduled = False
        if not self._stopped:
            self.node.tick(_now_ms())
            self._flush()

    def _committed(self, index: int) -> None:
        if self.on_commit is not None:
            self.on_commit(index)
        if not self._waiters:
            return
        log_ = self.node.log
        for i in [i for i in self._waiters if i <= index]:
            term, fut, _ = self._waiters.pop(i)
            if not fut.done():
                fut.set_result(C.SUCCESS if log_.term_at(i) == term else C.TERM_CHANGED)

    def _role_changed(self, term: int, role: Role) -> None:
        if role is not Role.LEADER:
            self._fail_waiters(C.TERM_CHANGED)
        if self.on_role_change is not None:
            self.on_role_change(term, role)

    def _fail_waiters(self, code: int) -> None:
        waiters, self._waiters = self._waiters, {}
        for _, fut, _ in waiters.values():
            if not fut.done():
                fut.set_result(code)

    def _expire_waiters(self, now: float) -> None:
        expired = [i for i, (_, _, deadline) in self._waiters.items() if deadline <= now]
        for i in expired:
            _, fut, _ = self._waiters.pop(i)
            if not fut.done():
                fut.set_result(C.WAIT_QUORUM_ACK_TIMEOUT)

    # ------------------------------------------------------------------ the timer

    async def _tick_routine(self) -> None:
        interval = self.tick_ms / 1000.0
        while True:
            await asyncio.sleep(interval)  # a period, not a synchronisation
            now = _now_ms()
            try:
                self.node.tick(now)
            except Exception:
                # As upstream's StateMaintainer: one failed step must not stop the node.
                log.exception("dledger.tick_failed", self_id=self.node.state.self_id)
            self._flush()
            if self._waiters:
                self._expire_waiters(now)

    # ------------------------------------------------------------------ sending

    def _flush(self) -> None:
        out = self.node.outbox
        if not out:
            return
        self.node.outbox = []
        for peer, req in out:
            queue = self._queues.get(peer)
            if queue is not None:
                queue.put_nowait(req)

    async def _sender(self, peer: str, queue: asyncio.Queue[RequestOrResponse]) -> None:
        addr = self.node.state.peers[peer]
        client = self._client
        assert client is not None
        timeout = self.node.timing.rpc_timeout_ms / 1000.0
        while True:
            req = await queue.get()
            code = CODE_OF[type(req)]
            cmd = RemotingCommand.create_request(code, None, encode_body(req))
            try:
                fut = await client.invoke_async(addr, cmd, timeout)
            except (RocketMQError, OSError) as exc:
                log.debug("dledger.send_failed", peer=peer, code=code, error=str(exc))
                self._deliver(peer, req, None)
                continue
            fut.add_done_callback(functools.partial(self._response_done, peer, req))

    def _response_done(self, peer: str, req: RequestOrResponse,
                       fut: asyncio.Future[RemotingCommand]) -> None:
        resp: RequestOrResponse | None = None
        if not fut.cancelled() and fut.exception() is None:
            types = request_types(CODE_OF[type(req)])
            assert types is not None
            try:
                resp = decode_body(types[1], fut.result().body)
            except ProtocolBodyError as exc:
                log.warning("dledger.bad_response", peer=peer, error=str(exc))
        self._deliver(peer, req, resp)

    def _deliver(self, peer: str, req: RequestOrResponse, resp: RequestOrResponse | None) -> None:
        if self._stopped:
            return
        try:
            self.node.on_response(peer, req, resp, _now_ms())
        except Exception:
            log.exception("dledger.response_failed", peer=peer, request=type(req).__name__)
        self._flush()

    # ------------------------------------------------------------------ serving

    def _channel_closed(self, channel: Channel, exc: BaseException | None) -> None:
        leader = self._leader_channels.pop(channel, None)
        if leader is None or self._stopped or leader in self._leader_channels.values():
            return
        node = self.node
        node.leader_connection_lost(leader, _now_ms())
        if node.state.is_follower and node.state.leader_id == leader:
            task = asyncio.get_running_loop().create_task(self._probe_leader(leader),
                                                          name=f"dledger-probe-{leader}")
            self._tasks.append(task)
            task.add_done_callback(self._probe_done)

    def _probe_done(self, task: asyncio.Task[None]) -> None:
        if task in self._tasks:
            self._tasks.remove(task)

    async def _probe_leader(self, leader: str) -> None:
        """Connect to the leader's address once: refused means its process is gone, so its
        followers need not wait for the heartbeat timeout (a timeout proves nothing: the
        2-interval wait applies then)."""
        client = self._client
        addr = self.node.state.peers.get(leader)
        if client is None or addr is None:
            return
        req = MetadataRequest(group=self.node.state.group, remote_id=leader,
                              local_id=self.node.state.self_id)
        cmd = RemotingCommand.create_request(int(DLedgerRequestCode.METADATA), None, encode_body(req))
        try:
            await client.invoke(addr, cmd, self.node.timing.heartbeat_interval_ms / 1000.0)
        except RemotingTimeoutError:
            return  # slow, not gone
        except (RocketMQError, OSError) as exc:
            # Refused, or reset while the dying process's sockets close: gone.
            if not self._stopped:
                log.debug("dledger.leader_probe_failed", leader=leader, error=str(exc))
                self.node.leader_unreachable(leader, _now_ms())
                self._flush()

    def _unsupported(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return request.create_response(int(C.UNSUPPORTED), f"request code {request.code} not supported")

    def _handle(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        types = request_types(request.code)
        if types is None:
            return self._unsupported(channel, request)
        req_type, resp_type = types
        try:
            req = decode_body(req_type, request.body)
        except ProtocolBodyError as exc:
            log.warning("dledger.bad_request", peer=channel.remote_addr, code=request.code,
                        error=str(exc))
            bad = resp_type(code=int(C.UNEXPECTED_ARGUMENT))
            return request.create_response(int(C.SUCCESS), None, None, encode_body(bad))
        if isinstance(req, HeartBeatRequest | PushEntryRequest) and req.leader_id is not None:
            self._leader_channels[channel] = req.leader_id
        resp = self._answer(req)
        self._flush()
        if resp is None:  # a transfer (registered apart): not expected here
            resp = resp_type(code=int(C.UNSUPPORTED))
        return request.create_response(int(C.SUCCESS), None, None, encode_body(resp))

    async def _handle_transfer(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """LEADERSHIP_TRANSFER: answered when the transfer is decided (the leader passes on
        the transferee's answer; the transferee answers once its election is decided)."""
        try:
            req = decode_body(LeadershipTransferRequest, request.body)
        except ProtocolBodyError as exc:
            log.warning("dledger.bad_request", peer=channel.remote_addr, code=request.code,
                        error=str(exc))
            bad = LeadershipTransferResponse(code=int(C.UNEXPECTED_ARGUMENT))
            return request.create_response(int(C.SUCCESS), None, None, encode_body(bad))
        resp = self._answer(req)
        if isinstance(resp, RequestOrResponse):
            self._flush()
            return request.create_response(int(C.SUCCESS), None, None, encode_body(resp))
        fut: asyncio.Future[LeadershipTransferResponse] = asyncio.get_running_loop().create_future()
        self._transfer_waiters[id(req)] = fut
        self._flush()
        wait = (self.node.timing.rpc_timeout_ms
                + self.node.timing.leadership_transfer_wait_timeout_ms) / 1000.0
        try:
            answer = await asyncio.wait_for(fut, wait)
        except TimeoutError:
            answer = LeadershipTransferResponse(term=self.node.term, code=int(C.TIMEOUT))
        finally:
            self._transfer_waiters.pop(id(req), None)
        return request.create_response(int(C.SUCCESS), None, None, encode_body(answer))

    def _transfer_answered(self, req: LeadershipTransferRequest,
                           resp: LeadershipTransferResponse) -> None:
        fut = self._transfer_waiters.get(id(req))
        if fut is not None and not fut.done():
            fut.set_result(resp)

    def transfer_leadership(self, transferee: str) -> None:
        """Hand this leader's role to ``transferee`` (no answer awaited)."""
        self.node.transfer_leadership(transferee, _now_ms())
        self._flush()

    def _answer(self, req: RequestOrResponse) -> RequestOrResponse | None:
        node = self.node
        st = node.state
        now = _now_ms()
        if req.remote_id != st.self_id or req.group != st.group:
            types = request_types(CODE_OF.get(type(req), 0))
            resp = (types[1]() if types is not None else RequestOrResponse()).copy_base(req)
            resp.code = int(C.UNKNOWN_MEMBER if req.remote_id != st.self_id else C.UNKNOWN_GROUP)
            resp.leader_id = st.leader_id
            return resp
        if isinstance(req, VoteRequest):
            return node.handle_vote(req, now)
        if isinstance(req, HeartBeatRequest):
            return node.handle_heartbeat(req, now)
        if isinstance(req, PushEntryRequest):
            return node.handle_push(req, now)
        if isinstance(req, LeadershipTransferRequest):
            return node.handle_leadership_transfer(req, now)
        if isinstance(req, MetadataRequest):
            # The term too (stock leaves it at -1): the transfer command needs it.
            return MetadataResponse(group=st.group, leader_id=st.leader_id, term=st.term,
                                    peers=dict(st.peers))
        if isinstance(req, GetEntriesRequest):
            out = GetEntriesResponse(group=st.group, leader_id=st.leader_id)
            if not node.is_leader:
                out.code = int(C.NOT_LEADER)
                return out
            entry = node.log.get(req.begin_index)
            if entry is not None:
                out.entries = [entry]
            return out
        return RequestOrResponse(code=int(C.UNSUPPORTED))
