"""``RaftNode``: one DLedger member's election, replication and commit logic, sans-IO.

The node never sleeps, reads a clock or touches a socket. Its owner (``server.py`` in a
broker, the simulation in the tests) calls it with the time in milliseconds and carries
its messages:

* ``tick(now)``: run the timers (heartbeats, election timeouts, push retries).
* ``handle_vote / handle_heartbeat / handle_push / handle_leadership_transfer(request, now)``:
  a peer's request; returns the response to send back (a transfer may return None: its
  answer comes later through ``transfer_listener(request, response)``).
* ``on_response(peer, request, response, now)``: the answer to a request this node sent
  (``response`` None: the transport failed or timed out, upstream's ``NETWORK_ERROR``).
* ``append(size, make_body, now)``: the leader appends an entry whose body
  ``make_body(pos)`` may depend on where the entry lands (RocketMQ writes ``pos + 48``
  into the record); returns the entry. ``NotLeaderError`` etc. otherwise.
* After any call, ``outbox`` holds ``(peer, request)`` pairs to send (the owner empties it).
* ``role_listener(term, role)`` is called on every role change, ``commit_listener(index)``
  when the committed index moves.

Election (``DLedgerLeaderElector``): a node starts as CANDIDATE. A candidate asks every
member for its vote (itself included) in its current term; the first round after becoming
candidate reuses the term, later ones take the next (``MemberState.next_term``). Votes and
their answers are upstream's, so stock members can take part: a voter refuses a candidate
whose log ends in an older term, or in the same term at a smaller index; one vote per term
(persisted before the answer); a request of a newer term makes the voter a candidate of
that term (answer REJECT_TERM_NOT_READY), after which the candidate asks again at once.
Unlike upstream, a node that follows a leader in a term refuses every other candidate of
that term even if it has not voted in it (it learnt the leader from a heartbeat): with five
members upstream could otherwise elect two leaders in one term. Randomized waits
(``min_vote_interval_ms`` .. ``max_vote_interval_ms``) separate rounds; a candidate told
another member still has a leader asks again one heartbeat interval later (upstream:
three). A follower that has not heard from its leader for ``max_heartbeat_leak *
heartbeat_interval_ms`` becomes a candidate; a leader that has not had a quorum of
heartbeat answers for as long steps down, and so does a leader whose heartbeat is answered
with a larger term (upstream ignores that answer while a quorum answers: a member whose
term ran ahead while its log fell behind could then never rejoin).

Replication (``DLedgerEntryPusher``): per follower the leader goes COMPARE -> (TRUNCATE)
-> APPEND, as upstream: it compares entries from its log end downwards until the follower
holds the same entry, truncates the follower there if it has more, then pushes entries in
order (batches, several in flight), each answer raising that follower's watermark; COMMIT
pushes carry the committed index when there is nothing to append. A follower answers
INCONSISTENT_STATE to anything that does not line up, and the leader compares again.

Commit: the leader's committed index is the highest index a quorum's watermarks reach
whose entry is of the leader's own term (Raft's rule; upstream also counts older terms,
which can lose a committed entry). A new leader whose log has entries past the committed
index therefore first appends one entry of its own term, made by ``noop_factory`` (in a
broker a ROLLBACK-type record that no consume queue or index takes); with nothing
uncommitted it appends nothing, so a fresh group's first message is at position 0.

Follower safety (ours; upstream trusts the leader's order): a follower tracks
``verified_index``, the end of the prefix it knows to equal the current leader's log
(entries it appended or compared equal in this term, and the committed ones). It appends
only right after a verified prefix, never truncates verified entries (a late duplicate
TRUNCATE cannot undo acknowledged appends) and commits only up to it. Duplicated,
reordered or lost messages therefore never break the log.

Leadership transfer (``handleLeadershipTransfer`` / ``handleTakeLeadership``, same wire):
LEADERSHIP_TRANSFER to the leader (``transferId`` = leader) sets the transferee, refuses
appends (LEADER_TRANSFERRING) and sends the transferee a take-leadership request carrying
the leader's end index; the transferee waits up to ``leadership_transfer_wait_timeout_ms``
to reach it, then stands in the next term at once (30-100 ms vote waits) and answers when
that election is decided; the leader passes the answer on and, on failure, takes appends
again. The transfer is an ordinary election: votes still check logs and terms, so it
cannot break the safety properties (the simulation runs transfers under faults). With
``preferred_leader_ids`` a leader not among them hands over every
``check_preferred_leader_ms`` to the live preferred member least behind, once fewer than
``max_leadership_transfer_wait_index`` entries behind (``checkPreferredLeader``); a
preferred member standing after a transfer refuses other candidates' votes when its log is
as long (REJECT_TAKING_LEADERSHIP). ``stats`` (``RaftStats``) count leader changes and time
the last leaderless stretch for the exporter.

Upstream: ``DLedgerLeaderElector``, ``DLedgerEntryPusher`` (EntryDispatcher, EntryHandler,
QuorumAckChecker), ``DLedgerServer.handle*`` (dledger 0.3.1.2).
"""

from __future__ import annotations

import enum
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.dledger.entry import DLedgerEntry, same_entry
from aiorocketmq.protocol.dledger.wire import (
    DLedgerResponseCode,
    HeartBeatRequest,
    HeartBeatResponse,
    LeadershipTransferRequest,
    LeadershipTransferResponse,
    PushEntryRequest,
    PushEntryResponse,
    PushType,
    RequestOrResponse,
    VoteRequest,
    VoteResponse,
    VoteResult,
)

from .log import LogError, RaftLog
from .member_state import MemberState, Role

__all__ = ["RaftNode", "Timing", "RaftStats", "RaftError", "NotLeaderError", "PendingFullError",
           "TransferringError", "MakeBody", "NoopFactory", "TransferListener"]

log = get_logger("aiorocketmq.store.dledger")

C = DLedgerResponseCode
MakeBody = Callable[[int], bytes]
NoopFactory = Callable[[], tuple[int, MakeBody]]
TransferListener = Callable[[LeadershipTransferRequest, LeadershipTransferResponse], None]


# A follower whose connection from its leader closed stands after this many heartbeat
# intervals without news (2 s with ours; a stock leader beats every 2 s but also pushes a
# commit every second, and reconnects at once when it lives).
LOST_LEADER_WAIT = 2
# A follower that found its leader gone stands in the next term within this many ms.
UNREACHABLE_STAGGER_MS = 150


class RaftError(Exception):
    """An append refused; ``code`` is upstream's response code for it."""

    code = C.INTERNAL_ERROR


class NotLeaderError(RaftError):
    code = C.NOT_LEADER


class PendingFullError(RaftError):
    code = C.LEADER_PENDING_FULL


class TransferringError(RaftError):
    code = C.LEADER_TRANSFERRING


@dataclass(slots=True)
class Timing:
    """Upstream ``DLedgerConfig`` defaults; tests may shorten them."""

    heartbeat_interval_ms: int = 2000
    max_heartbeat_leak: int = 3
    min_vote_interval_ms: int = 300
    max_vote_interval_ms: int = 1000
    max_push_timeout_ms: int = 1000
    rpc_timeout_ms: int = 3000
    compare_retry_ms: int = 500
    commit_push_interval_ms: int = 1000
    max_batch_entries: int = 64
    max_batch_bytes: int = 1024 * 1024
    max_inflight_pushes: int = 32
    max_pending_appends: int = 10000
    # Leadership transfer (DLedgerConfig): a transferee may be at most this many entries
    # behind the leader; it waits this long to catch up to the leader's end.
    max_leadership_transfer_wait_index: int = 1000
    leadership_transfer_wait_timeout_ms: int = 1000
    check_preferred_leader_ms: int = 1000


@dataclass(slots=True)
class RaftStats:
    """What the exporter shows of this member's elections (server/metrics).

    ``leader_changes``: how many times this member learnt of a leader other than the last one
    it knew (itself included). ``last_election_ms``: the last time it was without a leader,
    from losing one (or starting) to knowing the next; ``last_election_term`` the term of
    that leader. -1 until the first leader is known.
    """

    leader_changes: int = 0
    last_election_ms: float = -1.0
    last_election_term: int = -1
    transfers: int = 0


class _Parse(enum.Enum):
    WAIT_TO_REVOTE = 0
    REVOTE_IMMEDIATELY = 1
    PASSED = 2
    WAIT_TO_VOTE_NEXT = 3


@dataclass(slots=True)
class _VoteRound:
    term: int
    deadline: float
    requests: dict[str, VoteRequest]
    answered: set[str] = field(default_factory=set)
    valid: int = 0
    accepted: int = 0
    not_ready: int = 0
    bigger_ledger: int = 0
    already_has_leader: bool = False
    known_max_term: int = -1
    done: bool = False


@dataclass(slots=True)
class _HeartbeatRound:
    term: int
    deadline: float
    requests: dict[str, HeartBeatRequest]
    answered: set[str] = field(default_factory=set)
    succ: int = 1
    not_ready: int = 0
    max_term: int = -1
    inconsistent_leader: bool = False
    done: bool = False


class _PushState(enum.Enum):
    COMPARE = "COMPARE"
    TRUNCATE = "TRUNCATE"
    APPEND = "APPEND"


@dataclass(slots=True)
class _Peer:
    """The leader's view of one follower (upstream ``EntryDispatcher``)."""

    state: _PushState = _PushState.COMPARE
    compare_index: int = -1
    write_index: int = 0
    watermark: int = -1
    # The COMPARE/TRUNCATE request in flight (one at a time) and when it was sent.
    probe: PushEntryRequest | None = None
    probe_sent: float = 0.0
    retry_at: float = 0.0
    # APPEND requests in flight: first index -> (send time, request).
    inflight: dict[int, tuple[float, PushEntryRequest]] = field(default_factory=dict)
    last_push: float = float("-inf")
    told_commit: int = -1
    commit_inflight: PushEntryRequest | None = None


class RaftNode:
    """One member (see the module docstring)."""

    def __init__(self, state: MemberState, raft_log: RaftLog, *, timing: Timing | None = None,
                 rng: random.Random | None = None, noop_factory: NoopFactory | None = None,
                 now: float = 0.0, preferred_leader_ids: list[str] | None = None) -> None:
        self.state = state
        self.log = raft_log
        self.timing = timing or Timing()
        self.rng = rng or random.Random()
        self.noop_factory = noop_factory
        self.outbox: list[tuple[str, RequestOrResponse]] = []
        self.role_listener: Callable[[int, Role], None] | None = None
        self.commit_listener: Callable[[int], None] | None = None
        # election
        self._parse = _Parse.WAIT_TO_REVOTE
        self._next_vote_at = float("-inf")
        self._need_increase = False
        self._vote_round: _VoteRound | None = None
        self._last_leader_heartbeat = now
        self._leader_lost_at: float | None = None
        # leader
        self._hb_round: _HeartbeatRound | None = None
        self._last_send_heartbeat = float("-inf")
        self._last_succ_heartbeat = now
        self._peers: dict[str, _Peer] = {}
        # follower
        self.verified_index = raft_log.committed_index
        self._verified_for: tuple[int, str | None] = (-1, None)
        self.transferee: str | None = None
        self._take_leadership_term = -1
        # leadership transfer (module docstring): answers that come later go to this
        self.transfer_listener: TransferListener | None = None
        self.preferred_leader_ids = [p for p in preferred_leader_ids or [] if p]
        # take-leadership requests in flight: id -> (the request that asked, the one sent)
        self._transfers: dict[int, tuple[LeadershipTransferRequest | None,
                                         LeadershipTransferRequest]] = {}
        self._take: LeadershipTransferRequest | None = None  # the transferee's pending request
        self._take_wait_until = 0.0
        self._peer_live: dict[str, bool] = {}
        self._next_preferred_check = now
        # metrics
        self.stats = RaftStats()
        self._leaderless_since: float | None = now
        self._last_known_leader: str | None = None
        self._now = now

    # ------------------------------------------------------------------ queries

    @property
    def term(self) -> int:
        return self.state.term

    @property
    def role(self) -> Role:
        return self.state.role

    @property
    def is_leader(self) -> bool:
        return self.state.is_leader

    @property
    def leader_id(self) -> str | None:
        return self.state.leader_id

    @property
    def committed_index(self) -> int:
        return self.log.committed_index

    def peer_watermark(self, peer: str) -> int:
        p = self._peers.get(peer)
        return p.watermark if p is not None else -1

    # ------------------------------------------------------------------ transitions

    def _notify_role(self) -> None:
        st = self.state
        if st.leader_id is not None:
            if self._leaderless_since is not None:
                self.stats.last_election_ms = max(self._now - self._leaderless_since, 0.0)
                self.stats.last_election_term = st.term
                self._leaderless_since = None
            if st.leader_id != self._last_known_leader:
                self.stats.leader_changes += 1
                self._last_known_leader = st.leader_id
        elif self._leaderless_since is None:
            self._leaderless_since = self._now
        self._check_take(st.term, st.role)
        if self.role_listener is not None:
            self.role_listener(st.term, st.role)

    def _to_candidate(self, term: int, why: str) -> None:
        st = self.state
        if term < st.term:
            return
        was = st.role
        st.change_to_candidate(term)
        self._leader_lost_at = None
        self._vote_round = None
        self._hb_round = None
        self.transferee = None
        if was is not Role.CANDIDATE:
            log.info("dledger.role_candidate", self_id=st.self_id, term=st.term,
                     known_term=term, was=was.value, why=why)
            self._peers.clear()
            self._notify_role()
        else:
            self._check_take(st.term, st.role)

    def _to_follower(self, leader_id: str, now: float) -> None:
        st = self.state
        st.change_to_follower(leader_id)
        self._leader_lost_at = None
        self._parse = _Parse.WAIT_TO_REVOTE
        self._last_leader_heartbeat = now
        self._vote_round = None
        self._hb_round = None
        self._peers.clear()
        self.transferee = None
        self._reset_verified()
        log.info("dledger.role_follower", self_id=st.self_id, term=st.term, leader=leader_id)
        self._notify_role()

    def _to_leader(self, now: float) -> None:
        st = self.state
        st.change_to_leader()
        self._vote_round = None
        self._last_send_heartbeat = float("-inf")
        self._last_succ_heartbeat = now
        self._hb_round = None
        self.transferee = None
        self._peers = {p: _Peer() for p in st.other_peers}
        self._peer_live = {}
        self._next_preferred_check = now + self.timing.check_preferred_leader_ms
        log.info("dledger.role_leader", self_id=st.self_id, term=st.term,
                 ledger_end=self.log.end_index, committed=self.log.committed_index)
        if self.log.committed_index < self.log.end_index and self.noop_factory is not None:
            size, make_body = self.noop_factory()
            try:
                entry = self._append_entry(size, make_body)
            except (LogError, OSError) as exc:
                log.error("dledger.leader_marker_failed", self_id=st.self_id, error=repr(exc))
            else:
                log.info("dledger.leader_marker", self_id=st.self_id, term=st.term,
                         index=entry.index, pos=entry.pos)
        self._advance_commit()
        self._notify_role()
        self._heartbeat(now)

    def _reset_verified(self) -> None:
        self.verified_index = self.log.committed_index
        self._verified_for = (self.state.term, self.state.leader_id)

    # ------------------------------------------------------------------ timers

    def tick(self, now: float) -> None:
        self._now = now
        if self._take is not None:
            self._check_take_wait(now)
        st = self.state
        if st.is_leader:
            self._maintain_leader(now)
        elif st.is_follower:
            t = self.timing
            silent = now - self._last_leader_heartbeat
            lost = self._leader_lost_at
            if silent > t.max_heartbeat_leak * t.heartbeat_interval_ms or (
                    lost is not None and now - lost > LOST_LEADER_WAIT * t.heartbeat_interval_ms):
                log.info("dledger.heartbeat_timeout", self_id=st.self_id, term=st.term,
                         leader=st.leader_id, silent_ms=int(silent),
                         connection_lost=lost is not None)
                self._to_candidate(st.term, "heartbeat timeout")
                self._maintain_candidate(now)
        else:
            self._maintain_candidate(now)

    def leader_connection_lost(self, leader_id: str, now: float) -> None:
        """The connection that carried ``leader_id``'s heartbeats and pushes closed (its
        process died, most likely). A follower of it then stands after
        ``LOST_LEADER_WAIT`` heartbeat intervals without news instead of
        ``max_heartbeat_leak``: a live leader reconnects and beats well within that."""
        self._now = now
        st = self.state
        if st.is_follower and st.leader_id == leader_id and self._leader_lost_at is None:
            self._leader_lost_at = now
            log.info("dledger.leader_connection_lost", self_id=st.self_id, term=st.term,
                     leader=leader_id)

    def leader_unreachable(self, leader_id: str, now: float) -> None:
        """After ``leader_connection_lost``, the leader's address refused a connection: its
        process is gone. A follower that has heard nothing from it since stands now."""
        self._now = now
        st = self.state
        lost = self._leader_lost_at
        if (st.is_follower and st.leader_id == leader_id and lost is not None
                and self._last_leader_heartbeat <= lost):
            log.info("dledger.leader_unreachable", self_id=st.self_id, term=st.term, leader=leader_id,
                     silent_ms=int(now - self._last_leader_heartbeat))
            self._to_candidate(st.term, "the leader's address refuses connections")
            # Straight to the next term after a short random wait: in the leader's term the
            # other followers, still following it or standing themselves, would refuse, and a
            # second round would wait 300-1000 ms more. The first to stand in the next term
            # makes the others candidates of it, and they vote for it.
            self._parse = _Parse.WAIT_TO_VOTE_NEXT
            self._next_vote_at = now + self.rng.randrange(UNREACHABLE_STAGGER_MS)
            self._maintain_candidate(now)

    def _vote_wait(self) -> float:
        t = self.timing
        if self._take_leadership_term == self.state.term and self._take_leadership_term >= 0:
            return 30 + self.rng.randrange(70)
        return t.min_vote_interval_ms + self.rng.randrange(
            max(1, t.max_vote_interval_ms - t.min_vote_interval_ms))

    # ------------------------------------------------------------------ candidate

    def _maintain_candidate(self, now: float) -> None:
        rnd = self._vote_round
        if rnd is not None:
            if now >= rnd.deadline:
                self._finish_vote_round(rnd, now)
            return
        if now < self._next_vote_at and not self._need_increase:
            return
        st = self.state
        if self._parse is _Parse.WAIT_TO_VOTE_NEXT or self._need_increase:
            prev = st.term
            st.next_term()
            log.info("dledger.term_increased", self_id=st.self_id, prev=prev, term=st.term)
            self._parse = _Parse.WAIT_TO_REVOTE
        if self._need_increase:
            self._need_increase = False
            self._next_vote_at = now + self._vote_wait()
            return
        term = st.term
        rnd = _VoteRound(term, now + 2000 + self.rng.randrange(max(1, self.timing.max_vote_interval_ms)),
                         {})
        self._vote_round = rnd
        for peer in st.peers:
            req = VoteRequest(group=st.group, remote_id=peer, local_id=st.self_id,
                              leader_id=st.self_id, term=term,
                              ledger_end_index=self.log.end_index, ledger_end_term=self.log.end_term)
            if peer == st.self_id:
                self._count_vote(rnd, peer, self._vote(req, True, now), now)
                if self._vote_round is not rnd:
                    return
            else:
                rnd.requests[peer] = req
                self.outbox.append((peer, req))

    def _count_vote(self, rnd: _VoteRound, peer: str, resp: VoteResponse | None, now: float) -> None:
        if rnd.done or peer in rnd.answered:
            return
        rnd.answered.add(peer)
        if resp is not None:
            r = resp.vote_result
            if r is not VoteResult.UNKNOWN:
                rnd.valid += 1
            if r is VoteResult.ACCEPT:
                rnd.accepted += 1
            elif r is VoteResult.REJECT_ALREADY_HAS_LEADER:
                rnd.already_has_leader = True
            elif r in (VoteResult.REJECT_TERM_SMALL_THAN_LEDGER, VoteResult.REJECT_EXPIRED_VOTE_TERM):
                rnd.known_max_term = max(rnd.known_max_term, resp.term)
            elif r in (VoteResult.REJECT_EXPIRED_LEDGER_TERM, VoteResult.REJECT_SMALL_LEDGER_END_INDEX):
                rnd.bigger_ledger += 1
            elif r is VoteResult.REJECT_TERM_NOT_READY:
                rnd.not_ready += 1
        q = self.state.is_quorum
        if (rnd.already_has_leader or q(rnd.accepted) or q(rnd.accepted + rnd.not_ready)
                or len(rnd.answered) == len(self.state.peers)):
            self._finish_vote_round(rnd, now)

    def _finish_vote_round(self, rnd: _VoteRound, now: float) -> None:
        if rnd.done:
            return
        rnd.done = True
        if self._vote_round is rnd:
            self._vote_round = None
        st = self.state
        if not st.is_candidate or st.term != rnd.term:
            return
        q = st.is_quorum
        wait = self._vote_wait()
        t = self.timing
        if rnd.known_max_term > rnd.term:
            result = _Parse.WAIT_TO_VOTE_NEXT
            self._next_vote_at = now + wait
            self._to_candidate(rnd.known_max_term, "a larger term answered")
        elif rnd.already_has_leader:
            # Upstream waits max_heartbeat_leak heartbeats more; one is enough for a member
            # that lost the same leader to notice (two followers timing out together otherwise
            # both wait 6 s), and asking again in the same term disturbs no live leader.
            result = _Parse.WAIT_TO_REVOTE
            self._next_vote_at = now + wait + t.heartbeat_interval_ms
        elif not q(rnd.valid):
            result = _Parse.WAIT_TO_REVOTE
            self._next_vote_at = now + wait
        elif not q(rnd.valid - rnd.bigger_ledger):
            result = _Parse.WAIT_TO_REVOTE
            self._next_vote_at = now + wait + t.max_vote_interval_ms
        elif q(rnd.accepted):
            result = _Parse.PASSED
        elif q(rnd.accepted + rnd.not_ready):
            result = _Parse.REVOTE_IMMEDIATELY
            self._next_vote_at = now
        else:
            result = _Parse.WAIT_TO_VOTE_NEXT
            self._next_vote_at = now + wait
        self._parse = result
        log.info("dledger.vote_result", self_id=st.self_id, term=rnd.term, result=result.name,
                  accepted=rnd.accepted, not_ready=rnd.not_ready, valid=rnd.valid,
                  bigger_ledger=rnd.bigger_ledger, has_leader=rnd.already_has_leader)
        if result is _Parse.PASSED:
            self._to_leader(now)

    # ------------------------------------------------------------------ voter

    def handle_vote(self, req: VoteRequest, now: float) -> VoteResponse:
        self._now = now
        return self._vote(req, False, now)

    def _vote(self, req: VoteRequest, self_vote: bool, now: float) -> VoteResponse:
        st = self.state
        resp = VoteResponse().copy_base(req)

        def answer(result: VoteResult, term: int | None = None) -> VoteResponse:
            resp.term = st.term if term is None else term
            resp.vote_result = result
            return resp

        if not st.is_peer(req.leader_id):
            return answer(VoteResult.REJECT_UNKNOWN_LEADER)
        if not self_vote and req.leader_id == st.self_id:
            return answer(VoteResult.REJECT_UNEXPECTED_LEADER)
        if req.ledger_end_term < self.log.end_term:
            return answer(VoteResult.REJECT_EXPIRED_LEDGER_TERM)
        if req.ledger_end_term == self.log.end_term and req.ledger_end_index < self.log.end_index:
            return answer(VoteResult.REJECT_SMALL_LEDGER_END_INDEX)
        if req.term < st.term:
            return answer(VoteResult.REJECT_EXPIRED_VOTE_TERM)
        if req.term == st.term:
            if st.vote_for is None:
                if st.leader_id is not None and st.leader_id != req.leader_id:
                    return answer(VoteResult.REJECT_ALREADY_HAS_LEADER)
            elif st.vote_for != req.leader_id:
                if st.leader_id is not None:
                    return answer(VoteResult.REJECT_ALREADY_HAS_LEADER)
                return answer(VoteResult.REJECT_ALREADY_VOTED)
        else:
            self._to_candidate(req.term, f"vote request of {req.leader_id}")
            self._need_increase = True
            return answer(VoteResult.REJECT_TERM_NOT_READY)
        if req.term < self.log.end_term:
            return answer(VoteResult.REJECT_TERM_SMALL_THAN_LEDGER, self.log.end_term)
        if (not self_vote and self._taking_leadership() and req.ledger_end_term == self.log.end_term
                and self.log.end_index >= req.ledger_end_index):
            return answer(VoteResult.REJECT_TAKING_LEADERSHIP)
        if st.vote_for != req.leader_id:
            st.set_vote_for(req.leader_id)
        return answer(VoteResult.ACCEPT)

    def _taking_leadership(self) -> bool:
        """``isTakingLeadership``: a preferred member standing after a transfer to it."""
        return (bool(self.preferred_leader_ids) and self._take_leadership_term == self.state.term
                and self.state.self_id in self.preferred_leader_ids)

    # ------------------------------------------------------------------ heartbeats

    def handle_heartbeat(self, req: HeartBeatRequest, now: float) -> HeartBeatResponse:
        self._now = now
        st = self.state
        resp = HeartBeatResponse(term=st.term)
        if not st.is_peer(req.leader_id):
            resp.code = C.UNKNOWN_MEMBER
            return resp
        if req.leader_id == st.self_id:
            resp.code = C.UNEXPECTED_MEMBER
            return resp
        if req.term < st.term:
            resp.code = C.EXPIRED_TERM
            return resp
        if req.term == st.term:
            assert req.leader_id is not None
            if st.leader_id == req.leader_id:
                self._last_leader_heartbeat = now
                self._leader_lost_at = None
                return HeartBeatResponse()
            if st.leader_id is None:
                self._to_follower(req.leader_id, now)
                return HeartBeatResponse()
            log.error("dledger.inconsistent_leader", self_id=st.self_id, term=st.term,
                      leader=st.leader_id, claimed_by=req.leader_id)
            resp.code = C.INCONSISTENT_LEADER
            return resp
        self._to_candidate(req.term, f"heartbeat of {req.leader_id}")
        self._need_increase = True
        resp.code = C.TERM_NOT_READY
        return resp

    def _maintain_leader(self, now: float) -> None:
        rnd = self._hb_round
        if rnd is not None and not rnd.done and now >= rnd.deadline:
            self._finish_heartbeat_round(rnd, now)
        if not self.state.is_leader:
            return
        if now - self._last_send_heartbeat > self.timing.heartbeat_interval_ms:
            self._heartbeat(now)
        self._dispatch(now)
        if self.preferred_leader_ids:
            self._check_preferred_leader(now)

    def _heartbeat(self, now: float) -> None:
        rnd = self._hb_round
        if rnd is not None and not rnd.done:
            self._finish_heartbeat_round(rnd, now)
            if not self.state.is_leader:
                return
        st = self.state
        self._last_send_heartbeat = now
        rnd = _HeartbeatRound(st.term, now + self.timing.heartbeat_interval_ms, {})
        self._hb_round = rnd
        for peer in st.other_peers:
            req = HeartBeatRequest(group=st.group, local_id=st.self_id, remote_id=peer,
                                   leader_id=st.self_id, term=st.term)
            rnd.requests[peer] = req
            self.outbox.append((peer, req))
        if not rnd.requests:  # a group of one
            self._finish_heartbeat_round(rnd, now)

    def _count_heartbeat(self, rnd: _HeartbeatRound, peer: str, resp: HeartBeatResponse | None,
                         now: float) -> None:
        if rnd.done or peer in rnd.answered:
            return
        rnd.answered.add(peer)
        self._peer_live[peer] = resp is not None and resp.code == C.SUCCESS
        if resp is not None:
            if resp.code == C.SUCCESS:
                rnd.succ += 1
            elif resp.code == C.EXPIRED_TERM:
                rnd.max_term = max(rnd.max_term, resp.term)
            elif resp.code == C.INCONSISTENT_LEADER:
                rnd.inconsistent_leader = True
            elif resp.code == C.TERM_NOT_READY:
                rnd.not_ready += 1
        q = self.state.is_quorum
        if q(rnd.succ) or q(rnd.succ + rnd.not_ready) or len(rnd.answered) == len(rnd.requests):
            self._finish_heartbeat_round(rnd, now)

    def _finish_heartbeat_round(self, rnd: _HeartbeatRound, now: float) -> None:
        if rnd.done:
            return
        rnd.done = True
        st = self.state
        if not st.is_leader or st.term != rnd.term:
            return
        q = st.is_quorum
        t = self.timing
        if rnd.max_term > rnd.term:
            self._step_down(rnd.max_term)
            return
        if q(rnd.succ):
            self._last_succ_heartbeat = now
            return
        if q(rnd.succ + rnd.not_ready):
            self._last_send_heartbeat = float("-inf")
        elif rnd.inconsistent_leader:
            self._to_candidate(rnd.term, "a heartbeat answered INCONSISTENT_LEADER")
        elif now - self._last_succ_heartbeat > t.max_heartbeat_leak * t.heartbeat_interval_ms:
            self._to_candidate(rnd.term, "no quorum of heartbeat answers")

    def _step_down(self, term: int) -> None:
        """A member answered with a larger term: stand again, in a term above it. (Upstream
        ignores such an answer while a quorum answers, and a member whose term ran ahead
        while its log fell behind could then never rejoin: its votes are refused for the
        log, the leader's heartbeats by it for the term.)"""
        # During a transfer the larger term is most likely the transferee standing: let it
        # win first. A stock transferee waits a normal vote interval (up to
        # max_vote_interval_ms) before asking, so this one waits longer than that.
        transferring = self.transferee is not None
        self._to_candidate(term, "a heartbeat answered with a larger term")
        self._parse = _Parse.WAIT_TO_VOTE_NEXT
        t = self.timing
        self._next_vote_at = (self._now + 2 * t.max_vote_interval_ms + self._vote_wait()
                              if transferring else float("-inf"))

    # ------------------------------------------------------------------ leader: appends

    def append(self, size: int, make_body: MakeBody, now: float | None = None) -> DLedgerEntry:
        """Append an entry as leader (``handleAppend``); it is sent on the next ``tick``.

        Raises:
            NotLeaderError, TransferringError, PendingFullError, LogError, OSError.
        """
        if now is not None:
            self._now = now
        if not self.state.is_leader:
            raise NotLeaderError(f"{self.state.self_id} is not the leader (role {self.role.value})")
        if self.transferee is not None:
            raise TransferringError(f"leadership moving to {self.transferee}")
        if self.log.end_index - self.log.committed_index > self.timing.max_pending_appends:
            raise PendingFullError(f"{self.log.end_index - self.log.committed_index} appends wait")
        entry = self._append_entry(size, make_body)
        if not self._peers:
            self._advance_commit()
        return entry

    def _append_entry(self, size: int, make_body: MakeBody) -> DLedgerEntry:
        lg = self.log
        pos = lg.next_pos(48 + size)
        body = make_body(pos)
        if len(body) != size:
            raise LogError(f"body of {len(body)} bytes, announced {size}")
        entry = DLedgerEntry(lg.end_index + 1, self.state.term, pos, body)
        lg.append(entry)
        return entry

    def _advance_commit(self) -> None:
        if not self.state.is_leader:
            return
        lg = self.log
        marks = sorted([lg.end_index] + [p.watermark for p in self._peers.values()], reverse=True)
        quorum_index = marks[len(self.state.peers) // 2]
        if quorum_index > lg.committed_index and lg.term_at(quorum_index) == self.state.term:
            lg.set_committed(quorum_index)
            if self.commit_listener is not None:
                self.commit_listener(lg.committed_index)

    # ------------------------------------------------------------------ leader: dispatch

    def _push(self, peer: str, ptype: PushType, entry: DLedgerEntry | None = None,
              batch: list[DLedgerEntry] | None = None) -> PushEntryRequest:
        st = self.state
        req = PushEntryRequest(group=st.group, remote_id=peer, local_id=st.self_id,
                               leader_id=st.self_id, term=st.term,
                               commit_index=self.log.committed_index, type=ptype, entry=entry,
                               batch_entry=batch or [])
        self.outbox.append((peer, req))
        return req

    def _dispatch(self, now: float) -> None:
        for peer, p in self._peers.items():
            if p.state is _PushState.APPEND:
                self._dispatch_append(peer, p, now)
            else:
                self._dispatch_probe(peer, p, now)

    def _change(self, p: _Peer, state: _PushState, index: int = -1) -> None:
        p.state = state
        p.probe = None
        if state is _PushState.APPEND:
            p.compare_index = -1
            p.watermark = max(p.watermark, index)
            p.write_index = index + 1
            p.inflight.clear()
        elif state is _PushState.COMPARE:
            p.compare_index = -1
            p.inflight.clear()
        else:
            p.compare_index = index

    def _dispatch_probe(self, peer: str, p: _Peer, now: float) -> None:
        t = self.timing
        if p.probe is not None:
            if now - p.probe_sent < t.rpc_timeout_ms:
                return
            p.probe = None  # no answer: try again
            p.retry_at = now + t.compare_retry_ms
        if now < p.retry_at:
            return
        lg = self.log
        if p.state is _PushState.TRUNCATE:
            entry = lg.get(p.compare_index)
            if entry is None:
                self._change(p, _PushState.COMPARE)
                return
            p.probe = self._push(peer, PushType.TRUNCATE, entry)
            p.probe_sent = now
            return
        if lg.end_index < 0:
            return  # nothing to compare yet (upstream waits for the first entry too)
        if p.compare_index < 0 or not lg.begin_index <= p.compare_index <= lg.end_index:
            p.compare_index = lg.end_index
        entry = lg.get(p.compare_index)
        assert entry is not None
        p.probe = self._push(peer, PushType.COMPARE, entry)
        p.probe_sent = now

    def _dispatch_append(self, peer: str, p: _Peer, now: float) -> None:
        t = self.timing
        lg = self.log
        if p.inflight and now - min(sent for sent, _ in p.inflight.values()) > t.max_push_timeout_ms:
            # An append went unanswered: push again from the first index not acknowledged
            # (the follower answers SUCCESS to the ones it already has).
            log.debug("dledger.push_retry", peer=peer, index=p.watermark + 1)
            p.inflight.clear()
            p.write_index = p.watermark + 1
        while p.write_index <= lg.end_index and len(p.inflight) < t.max_inflight_pushes:
            batch: list[DLedgerEntry] = []
            size = 0
            index = p.write_index
            while index <= lg.end_index and len(batch) < t.max_batch_entries:
                entry = lg.get(index)
                if entry is None:
                    self._change(p, _PushState.COMPARE)
                    return
                if batch and size + entry.size > t.max_batch_bytes:
                    break
                batch.append(entry)
                size += entry.size
                index += 1
            if len(batch) == 1:
                req = self._push(peer, PushType.APPEND, batch[0])
            else:
                req = self._push(peer, PushType.APPEND, batch=batch)
            p.inflight[p.write_index] = (now, req)
            p.write_index = index
            p.last_push = now
            p.told_commit = lg.committed_index
        if (p.write_index > lg.end_index and not p.inflight and p.commit_inflight is None
                and (p.told_commit < lg.committed_index
                     or now - p.last_push > t.commit_push_interval_ms)):
            p.commit_inflight = self._push(peer, PushType.COMMIT)
            p.last_push = now
            p.told_commit = lg.committed_index

    def _on_push_response(self, peer: str, req: PushEntryRequest, resp: PushEntryResponse | None,
                          now: float) -> None:
        st = self.state
        p = self._peers.get(peer)
        if p is None or not st.is_leader or req.term != st.term:
            return
        code = resp.code if resp is not None else C.NETWORK_ERROR
        if req.type is PushType.COMMIT:
            if p.commit_inflight is req:
                p.commit_inflight = None
            return
        if req.type is PushType.APPEND:
            first = req.first_entry_index
            if p.inflight.get(first, (0.0, None))[1] is req:
                del p.inflight[first]
            if code == C.SUCCESS:
                last = first + req.count - 1
                if last > p.watermark:
                    p.watermark = last
                    self._advance_commit()
            elif code == C.INCONSISTENT_STATE or code == C.NETWORK_ERROR:
                if p.state is _PushState.APPEND:
                    log.info("dledger.push_rejected", self_id=st.self_id, peer=peer, index=first,
                             code=int(code))
                    self._change(p, _PushState.COMPARE)
                    p.retry_at = now + (self.timing.compare_retry_ms if code == C.NETWORK_ERROR else 0)
            return
        if p.probe is not req:
            return
        p.probe = None
        if resp is None or code not in (C.SUCCESS, C.INCONSISTENT_STATE):
            p.retry_at = now + self.timing.compare_retry_ms
            if p.state is _PushState.TRUNCATE:
                self._change(p, _PushState.COMPARE)
            return
        lg = self.log
        if req.type is PushType.TRUNCATE:
            if code == C.SUCCESS:
                self._change(p, _PushState.APPEND, p.compare_index)
                self._advance_commit()
            else:
                self._change(p, _PushState.COMPARE)
            return
        # COMPARE
        ci = p.compare_index
        truncate_index = -1
        if code == C.SUCCESS:
            if ci == resp.end_index:
                self._change(p, _PushState.APPEND, ci)
                self._advance_commit()
                return
            truncate_index = ci
        elif resp.end_index < lg.begin_index or resp.begin_index > lg.end_index:
            truncate_index = lg.begin_index
        elif ci < resp.begin_index:
            truncate_index = lg.begin_index
        elif ci > resp.end_index:
            p.compare_index = resp.end_index
        else:
            p.compare_index = ci - 1
        if truncate_index < 0 and p.compare_index < lg.begin_index:
            truncate_index = lg.begin_index
        if truncate_index >= 0:
            self._change(p, _PushState.TRUNCATE, truncate_index)

    # ------------------------------------------------------------------ follower: pushes

    def handle_push(self, req: PushEntryRequest, now: float) -> PushEntryResponse:
        self._now = now
        st = self.state
        lg = self.log

        def answer(code: int) -> PushEntryResponse:
            resp = PushEntryResponse(group=req.group, code=code, term=req.term,
                                     begin_index=lg.begin_index, end_index=lg.end_index)
            if req.type is not PushType.COMMIT:
                resp.index = req.first_entry_index
                resp.count = req.count
            return resp

        if req.term < st.term:
            return answer(C.EXPIRED_TERM)
        if not st.is_follower or req.term != st.term or req.leader_id != st.leader_id:
            return answer(C.INCONSISTENT_STATE if req.type is PushType.APPEND else C.NOT_FOLLOWER)
        if self._verified_for != (st.term, st.leader_id):
            self._reset_verified()
        self._last_leader_heartbeat = now  # a push from the leader is a sign of life too
        self._leader_lost_at = None
        code: int
        try:
            if req.type is PushType.COMMIT:
                code = C.SUCCESS
            elif req.type is PushType.COMPARE:
                code = self._follower_compare(req)
            elif req.type is PushType.TRUNCATE:
                code = self._follower_truncate(req)
            else:
                code = self._follower_append(req)
        except (LogError, OSError) as exc:
            log.error("dledger.push_failed", self_id=st.self_id, type=req.type.value,
                      index=req.first_entry_index, error=repr(exc))
            code = C.INCONSISTENT_STATE
        if code == C.SUCCESS:
            self._follower_commit(req.commit_index)
        return answer(code)

    def _follower_commit(self, leader_commit: int) -> None:
        target = min(leader_commit, self.verified_index)
        if target > self.log.committed_index:
            self.log.set_committed(target)
            if self.commit_listener is not None:
                self.commit_listener(self.log.committed_index)

    def _matches(self, entry: DLedgerEntry) -> bool:
        local = self.log.get(entry.index)
        return local is not None and same_entry(local, entry)

    def _follower_compare(self, req: PushEntryRequest) -> int:
        entry = req.entry
        if entry is None:
            return C.UNEXPECTED_ARGUMENT
        if self._matches(entry):
            self.verified_index = max(self.verified_index, entry.index)
            return C.SUCCESS
        return C.INCONSISTENT_STATE

    def _follower_truncate(self, req: PushEntryRequest) -> int:
        entry = req.entry
        if entry is None:
            return C.UNEXPECTED_ARGUMENT
        lg = self.log
        if self._matches(entry):
            keep = max(entry.index, self.verified_index)
            if keep < lg.end_index:
                log.info("dledger.truncated", self_id=self.state.self_id, after=keep,
                         dropped=lg.end_index - keep)
                lg.truncate_after(keep)
            self.verified_index = max(self.verified_index, entry.index)
            return C.SUCCESS
        if entry.index > lg.end_index + 1:
            # The leader's first entry is past our end (its retention deleted what lies
            # between): begin the log anew with it (upstream's truncate rebuilds the files).
            try:
                lg.reset_to(entry)
            except LogError as exc:
                log.warn("dledger.reset_refused", self_id=self.state.self_id, error=str(exc))
                return C.INCONSISTENT_STATE
            self.verified_index = entry.index
            return C.SUCCESS
        if entry.index != self.verified_index + 1:
            # Writing it would put a leader's entry after entries not known to be the
            # leader's (or leave a gap): let the leader compare again.
            return C.INCONSISTENT_STATE
        if entry.index <= lg.end_index:
            log.info("dledger.truncated", self_id=self.state.self_id, after=entry.index - 1,
                     dropped=lg.end_index - entry.index + 1)
        lg.truncate_after(entry.index - 1)
        lg.append(entry)
        self.verified_index = entry.index
        return C.SUCCESS

    def _follower_append(self, req: PushEntryRequest) -> int:
        lg = self.log
        entries = req.entries
        if not entries:
            return C.UNEXPECTED_ARGUMENT
        for entry in entries:
            i = entry.index
            if i <= self.verified_index:
                continue
            if i <= lg.end_index:
                if not self._matches(entry):
                    return C.INCONSISTENT_STATE
                self.verified_index = i
                continue
            if i != lg.end_index + 1 or self.verified_index != lg.end_index:
                return C.INCONSISTENT_STATE
            lg.append(entry)
            self.verified_index = i
        return C.SUCCESS

    # ------------------------------------------------------------------ leadership transfer

    def handle_leadership_transfer(self, req: LeadershipTransferRequest,
                                   now: float) -> LeadershipTransferResponse | None:
        """A LEADERSHIP_TRANSFER request (``DLedgerServer.handleLeadershipTransfer``).

        To the leader (``transferId`` = this node; sent by an admin tool): checks, sets the
        transferee (appends are refused from then on) and sends the transferee a take-
        leadership request; the answer is the transferee's, later. To the transferee: once its
        log reaches ``takeLeadershipLedgerIndex`` (waiting up to
        ``leadership_transfer_wait_timeout_ms``) it stands in the next term at once; the answer
        comes when that election is decided (SUCCESS as leader, TAKE_LEADERSHIP_FAILED as a
        follower, EXPIRED_TERM when a later term won). ``None``: answered later through
        ``transfer_listener(req, response)``.
        """
        self._now = now
        st = self.state
        if req.transfer_id is not None and req.transfer_id == st.self_id:
            return self._begin_transfer(req, req.transferee_id, now)
        if req.transferee_id is not None and req.transferee_id == st.self_id:
            if req.transfer_id != st.leader_id:
                return self._transfer_failed(req, C.INCONSISTENT_LEADER)
            if req.take_leadership_ledger_index > self.log.end_index:
                if self._take is not None:
                    self._answer_take(self._take, C.TAKE_LEADERSHIP_FAILED, st.term)
                self._take = req
                self._take_wait_until = now + self.timing.leadership_transfer_wait_timeout_ms
                return None
            return self._take_leadership(req)
        resp = LeadershipTransferResponse(term=st.term)
        resp.code = C.UNEXPECTED_ARGUMENT
        return resp

    def transfer_leadership(self, transferee: str, now: float) -> LeadershipTransferResponse | None:
        """This leader hands over to ``transferee`` (the preferred-leader check; a request of
        an admin tool goes through ``handle_leadership_transfer``). None: under way."""
        st = self.state
        req = LeadershipTransferRequest(group=st.group, remote_id=st.self_id, local_id=st.self_id,
                                        leader_id=st.leader_id, term=st.term,
                                        transfer_id=st.self_id, transferee_id=transferee)
        self._now = now
        return self._begin_transfer(req, transferee, now, from_peer=False)

    def _transfer_failed(self, req: LeadershipTransferRequest, code: int) -> LeadershipTransferResponse:
        resp = LeadershipTransferResponse().copy_base(req)
        resp.code = code
        resp.leader_id = self.state.leader_id
        return resp

    def _begin_transfer(self, req: LeadershipTransferRequest, transferee: str | None, now: float,
                        *, from_peer: bool = True) -> LeadershipTransferResponse | None:
        st = self.state
        if not st.is_peer(transferee) or transferee == st.self_id:
            return self._transfer_failed(req, C.UNKNOWN_MEMBER)
        assert transferee is not None
        if req.term != st.term:
            return self._transfer_failed(req, C.INCONSISTENT_TERM)
        if not st.is_leader:
            return self._transfer_failed(req, C.NOT_LEADER)
        behind = self.log.end_index - self.peer_watermark(transferee)
        if behind >= self.timing.max_leadership_transfer_wait_index:
            return self._transfer_failed(req, C.FALL_BEHIND_TOO_MUCH)
        if self.transferee is not None:
            resp = LeadershipTransferResponse(term=st.term)
            resp.code = C.LEADER_TRANSFERRING
            return resp
        self.transferee = transferee
        self.stats.transfers += 1
        take = LeadershipTransferRequest(group=st.group, remote_id=transferee, local_id=st.self_id,
                                         leader_id=st.self_id, term=st.term,
                                         transfer_id=st.self_id, transferee_id=transferee,
                                         take_leadership_ledger_index=self.log.end_index)
        self._transfers[id(take)] = (req if from_peer else None, take)
        self.outbox.append((transferee, take))
        log.info("dledger.leadership_transfer", self_id=st.self_id, term=st.term,
                 transferee=transferee, behind=behind, end=self.log.end_index)
        # Push to the transferee now: it must reach this end to stand.
        p = self._peers.get(transferee)
        if p is not None:
            p.last_push = float("-inf")
        return None

    def _on_transfer_response(self, req: LeadershipTransferRequest,
                              resp: LeadershipTransferResponse | None) -> None:
        pending = self._transfers.pop(id(req), None)
        if pending is None:
            return
        st = self.state
        answer = resp if resp is not None else LeadershipTransferResponse(term=st.term)
        if resp is None:
            answer.code = C.NETWORK_ERROR
        if answer.code != C.SUCCESS or (st.term == req.term and self.transferee is not None):
            if st.term == req.term and self.transferee == req.transferee_id:
                self.transferee = None  # failed (or not yet done): appends go on here
        log.info("dledger.leadership_transfer_done", self_id=st.self_id, transferee=req.transferee_id,
                 code=int(answer.code), term=answer.term)
        client_req = pending[0]
        if client_req is not None and self.transfer_listener is not None:
            self.transfer_listener(client_req, answer)

    def _take_leadership(self, req: LeadershipTransferRequest) -> LeadershipTransferResponse | None:
        """``handleTakeLeadership``: stand in the next term at once."""
        st = self.state
        if req.term != st.term:
            resp = LeadershipTransferResponse(term=st.term)
            resp.code = C.INCONSISTENT_TERM
            return resp
        if self._take is not None and self._take is not req:
            self._answer_take(self._take, C.TAKE_LEADERSHIP_FAILED, st.term)
        self._take = req
        self._take_wait_until = 0.0
        self._take_leadership_term = st.term + 1
        self._to_candidate(st.term + 1, f"leadership transfer from {req.transfer_id}")
        self._need_increase = True
        return None

    def _check_take_wait(self, now: float) -> None:
        """A transferee waiting to catch up (``handleLeadershipTransfer``'s wait loop)."""
        req = self._take
        if req is None or self._take_wait_until <= 0:
            return
        if self.log.end_index >= req.take_leadership_ledger_index:
            self._take_wait_until = 0.0
            answer = self._take_leadership(req)
            if answer is not None:
                self._answer_take(req, answer.code, answer.term)
        elif now >= self._take_wait_until:
            self._answer_take(req, C.TAKE_LEADERSHIP_FAILED, self.state.term)

    def _check_take(self, term: int, role: Role) -> None:
        """``TakeLeadershipTask.check``: on every role change of a standing transferee."""
        req = self._take
        target = self._take_leadership_term
        if req is None or self._take_wait_until > 0 or target < 0:
            return
        if role is Role.CANDIDATE and term <= target:
            return  # standing (a candidate's term reaches the target on its first round)
        if term > target:
            code = C.EXPIRED_TERM
        elif term == target:
            if role is Role.LEADER:
                code = C.SUCCESS
            elif role is Role.FOLLOWER:
                code = C.TAKE_LEADERSHIP_FAILED
            else:
                return
        elif role is Role.FOLLOWER:
            code = C.TAKE_LEADERSHIP_FAILED
        else:
            code = C.INTERNAL_ERROR
        self._answer_take(req, code, term)
        self._take_leadership_term = -1

    def _answer_take(self, req: LeadershipTransferRequest, code: int, term: int) -> None:
        if self._take is req:
            self._take = None
            self._take_wait_until = 0.0
        resp = LeadershipTransferResponse(term=term)
        resp.code = code
        log.info("dledger.take_leadership_done", self_id=self.state.self_id, code=int(code), term=term)
        if self.transfer_listener is not None:
            self.transfer_listener(req, resp)

    def _check_preferred_leader(self, now: float) -> None:
        """``checkPreferredLeader``: a leader not among the preferred ones hands over to the
        live preferred member least behind, once it is fewer than
        ``max_leadership_transfer_wait_index`` entries behind."""
        if now < self._next_preferred_check:
            return
        self._next_preferred_check = now + self.timing.check_preferred_leader_ms
        st = self.state
        preferred = self.preferred_leader_ids
        if not preferred or self.transferee is not None or st.self_id in preferred:
            return
        best: str | None = None
        best_behind = 0
        for peer in preferred:
            if not st.is_peer(peer) or not self._peer_live.get(peer, False):
                continue
            behind = self.log.end_index - self.peer_watermark(peer)
            if best is None or behind < best_behind:
                best, best_behind = peer, behind
        if best is not None and best_behind < self.timing.max_leadership_transfer_wait_index:
            log.info("dledger.preferred_leader", self_id=st.self_id, transferee=best, behind=best_behind)
            self.transfer_leadership(best, now)

    # ------------------------------------------------------------------ responses

    def on_response(self, peer: str, req: RequestOrResponse, resp: RequestOrResponse | None,
                    now: float) -> None:
        """The answer to ``req`` (sent to ``peer``), None when it failed or timed out."""
        self._now = now
        if isinstance(req, VoteRequest):
            rnd = self._vote_round
            if rnd is not None and rnd.requests.get(peer) is req:
                self._count_vote(rnd, peer, resp if isinstance(resp, VoteResponse) else None, now)
        elif isinstance(req, HeartBeatRequest):
            hb = self._hb_round
            answer = resp if isinstance(resp, HeartBeatResponse) else None
            if hb is not None and hb.requests.get(peer) is req and not hb.done:
                self._count_heartbeat(hb, peer, answer, now)
            elif (answer is not None and answer.code == C.EXPIRED_TERM and self.state.is_leader
                  and req.term == self.state.term and answer.term > req.term):
                self._step_down(answer.term)  # a late answer of a finished round
        elif isinstance(req, PushEntryRequest):
            self._on_push_response(peer, req, resp if isinstance(resp, PushEntryResponse) else None,
                                   now)
        elif isinstance(req, LeadershipTransferRequest):
            self._on_transfer_response(req, resp if isinstance(resp, LeadershipTransferResponse)
                                       else None)
