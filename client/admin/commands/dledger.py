"""DLedger commands (ours: stock 4.9.7's ``mqadmin`` has none; the DLedger library's own CLI
has ``leadershipTransfer`` with the same options): leadershipTransfer.

``leadershipTransfer -g <dLegerGroup> -p <dLegerPeers> -t <transfereeId> [-l <leaderId>]
[--term <term>]`` sends LEADERSHIP_TRANSFER (request code 51005, fastjson body, on the
leader's ``dLegerPeers`` address) to the group's leader, as ``DLedgerClient.leadershipTransfer``
does, and prints the answer, which arrives once the transferee has won (or lost) the next
term's election. Without ``-l`` the leader is asked of the peers (METADATA, 50000); without
``--term`` the term is the one a member of ours following that leader (or leading) reports
with its metadata (stock members do not report it: give ``--term`` for an all-stock group). Exit 1 unless the answer is SUCCESS.
"""

from __future__ import annotations

import argparse

from aiorocketmq.protocol.dledger.wire import (
    DLedgerRequestCode,
    DLedgerResponseCode,
    LeadershipTransferRequest,
    LeadershipTransferResponse,
    MetadataRequest,
    MetadataResponse,
    ProtocolBodyError,
    decode_body,
    encode_body,
    parse_peers,
)
from aiorocketmq.protocol.errors import MQClientError, RocketMQError

from ..api import MQAdmin
from .base import Output, UsageError, command, opt

# The transferee may wait a second to catch up, then an election runs: more than the
# usual request timeout.
TRANSFER_TIMEOUT = 10.0
# DLedger answers every RPC with remoting code 200 (its SUCCESS); the body says what happened.
_OK = (int(DLedgerResponseCode.SUCCESS),)


def _code_name(code: int) -> str:
    try:
        return DLedgerResponseCode(code).name
    except ValueError:
        return str(code)


async def _metadata(admin: MQAdmin, group: str, peer: str, addr: str) -> MetadataResponse | None:
    req = MetadataRequest(group=group, remote_id=peer)
    try:
        resp = await admin.invoke(addr, int(DLedgerRequestCode.METADATA), body=encode_body(req),
                                  ok=_OK)
        return decode_body(MetadataResponse, resp.body)
    except (RocketMQError, OSError, TimeoutError, ProtocolBodyError):
        return None


@command("leadershipTransfer", "Transfer the leadership of a DLedger group to another member",
         opt("-g", "--group", required=True, help="dLegerGroup of the group"),
         opt("-p", "--peers", required=True, help="dLegerPeers, n0-host:port;n1-host:port;..."),
         opt("-t", "--transfereeId", required=True, help="the member to lead next, e.g. n1"),
         opt("-l", "--leader", help="the current leader's id (asked of the peers if absent)"),
         opt("--term", type=int, help="the current term (asked of the leader if absent)"))
async def leadership_transfer(admin: MQAdmin, args: argparse.Namespace) -> Output:
    try:
        peers = parse_peers(args.peers)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.transfereeId not in peers:
        raise UsageError(f"transfereeId {args.transfereeId} is not among the peers {sorted(peers)}")
    leader: str | None = args.leader
    term: int | None = args.term
    if leader is None or term is None:
        for peer, addr in peers.items():
            meta = await _metadata(admin, args.group, peer, addr)
            if meta is None or meta.code != DLedgerResponseCode.SUCCESS or not meta.leader_id:
                continue
            leader = leader or meta.leader_id
            # A member that follows the leader is in the leader's term.
            if term is None and meta.leader_id == leader and meta.term >= 0:
                term = meta.term
            if leader is not None and term is not None:
                break
    if leader is None:
        raise MQClientError(f"no member of {args.group} knows a leader")
    if leader not in peers:
        raise UsageError(f"leader {leader} is not among the peers {sorted(peers)}")
    if term is None:
        raise MQClientError(f"the leader {leader} does not report its term: give --term")
    if leader == args.transfereeId:
        return Output({"code": "SUCCESS", "leader": leader, "term": term},
                      f"{leader} leads {args.group} already (term {term})\n")
    req = LeadershipTransferRequest(group=args.group, remote_id=leader, transfer_id=leader,
                                    transferee_id=args.transfereeId, term=term)
    resp = await admin.invoke(peers[leader], int(DLedgerRequestCode.LEADERSHIP_TRANSFER),
                              body=encode_body(req), timeout=max(admin.timeout, TRANSFER_TIMEOUT),
                              ok=_OK)
    try:
        answer = decode_body(LeadershipTransferResponse, resp.body)
    except ProtocolBodyError as exc:
        raise MQClientError(f"bad answer from {peers[leader]}: {exc}") from None
    name = _code_name(answer.code)
    data = {"code": name, "group": args.group, "from": leader, "to": args.transfereeId,
            "term": answer.term}
    if answer.code != DLedgerResponseCode.SUCCESS:
        raise MQClientError(f"LeadershipTransfer code={name} ({leader} -> {args.transfereeId}, "
                            f"term {answer.term})")
    return Output(data, f"LeadershipTransfer code={name}, {leader} -> {args.transfereeId}, "
                        f"term {answer.term}\n")
