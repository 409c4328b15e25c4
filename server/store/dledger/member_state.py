"""A DLedger member's identity and Raft state: group, peers, role, term, vote, leader.

Contract:

  (``MemberState`` splits each item at its first ``-``); ``broker_id_of("n12")`` is 13, the
  brokerId a follower registers with (``DLedgerCommitLog``: digits after the first
  character, plus one).
* ``term`` and ``vote_for`` survive restarts in ``<dir>/currterm`` (Java properties text:
  ``currTerm=<n>`` and ``voteLeader=<id or empty>``). Every change of either is written
  before the method returns (``persist``, an fsynced atomic replace), so a node never
  votes twice in one term, whatever the moment of a crash. ``directory=None`` keeps them
  in memory only (the simulation's nodes, which model a restart by keeping the object).
* ``role`` / ``leader_id`` are volatile: a restarted node is a CANDIDATE without leader.
* ``known_max_term`` is the largest term seen in a request while this node could not yet
  take it: ``next_term`` moves to it (or to term + 1), as upstream's ``nextTerm``.

Upstream: ``MemberState.java`` (dledger 0.3.1.2).
"""

from __future__ import annotations

import enum
import os
from pathlib import Path

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.atomic_file import write_file_atomic
from aiorocketmq.protocol.bodies import string_to_properties
from aiorocketmq.protocol.errors import ProtocolError

__all__ = ["MemberState", "Role", "broker_id_of", "TERM_PERSIST_FILE"]

log = get_logger("aiorocketmq.store.dledger")

TERM_PERSIST_FILE = "currterm"
_KEY_TERM = "currTerm"
_KEY_VOTE = "voteLeader"


class Role(enum.Enum):
    CANDIDATE = "CANDIDATE"
    LEADER = "LEADER"
    FOLLOWER = "FOLLOWER"



def broker_id_of(self_id: str) -> int:
    """``Integer.parseInt(selfId.substring(1)) + 1``.

    Raises:
        ValueError: ``self_id`` is not a letter followed by digits (stock refuses it at start).
    """
    digits = self_id[1:]
    if not digits.isdigit():
        raise ValueError(f"dLegerSelfId {self_id!r} must be one letter and digits, e.g. n0")
    return int(digits) + 1


class MemberState:
    """The state every DLedger component of one node reads (see the module docstring)."""

    __slots__ = ("group", "self_id", "peers", "role", "leader_id", "term", "vote_for",
                 "known_max_term", "_path")

    def __init__(self, group: str, self_id: str, peers: dict[str, str],
                 directory: str | os.PathLike[str] | None = None) -> None:
        if self_id not in peers:
            raise ValueError(f"dLegerSelfId {self_id} is not in dLegerPeers {sorted(peers)}")
        self.group = group
        self.self_id = self_id
        self.peers = dict(peers)
        self.role = Role.CANDIDATE
        self.leader_id: str | None = None
        self.term = 0
        self.vote_for: str | None = None
        self.known_max_term = -1
        self._path = Path(directory) / TERM_PERSIST_FILE if directory is not None else None
        self._load()

    # -- persistence ------------------------------------------------------------------

    def _load(self) -> None:
        path = self._path
        if path is None:
            return
        for candidate in (path, path.with_name(path.name + ".bak")):
            try:
                props = string_to_properties(candidate.read_text(encoding="utf-8"))
                term = int(props.get(_KEY_TERM, "0"))
            except (OSError, ValueError, ProtocolError):
                continue
            self.term = term
            self.vote_for = props.get(_KEY_VOTE) or None
            return

    def persist(self) -> None:
        """Write ``currterm`` now (durably) when this state has a directory."""
        if self._path is None:
            return
        text = f"{_KEY_TERM}={self.term}\n{_KEY_VOTE}={self.vote_for or ''}\n"
        write_file_atomic(self._path, text.encode("utf-8"), backup=True)

    # -- transitions ------------------------------------------------------------------

    def set_vote_for(self, candidate: str | None) -> None:
        self.vote_for = candidate
        self.persist()

    def next_term(self) -> int:
        """A candidate's next term: the largest known one, else term + 1; no vote yet."""
        if self.known_max_term > self.term:
            self.term = self.known_max_term
        else:
            self.term += 1
        self.vote_for = None
        self.persist()
        return self.term

    def change_to_leader(self) -> None:
        self.role = Role.LEADER
        self.leader_id = self.self_id

    def change_to_follower(self, leader_id: str) -> None:
        self.role = Role.FOLLOWER
        self.leader_id = leader_id

    def change_to_candidate(self, term: int) -> None:
        """Candidate, leaderless; ``term`` (>= the current one) becomes known."""
        if term > self.known_max_term:
            self.known_max_term = term
        self.role = Role.CANDIDATE
        self.leader_id = None

    # -- queries ----------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def is_follower(self) -> bool:
        return self.role is Role.FOLLOWER

    @property
    def is_candidate(self) -> bool:
        return self.role is Role.CANDIDATE

    @property
    def self_addr(self) -> str:
        return self.peers[self.self_id]

    def is_peer(self, node_id: str | None) -> bool:
        return node_id is not None and node_id in self.peers

    def is_quorum(self, n: int) -> bool:
        return n >= len(self.peers) // 2 + 1

    @property
    def other_peers(self) -> list[str]:
        return [p for p in self.peers if p != self.self_id]
