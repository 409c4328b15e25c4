"""DLedger mode: the commit log replicated by Raft, compatible with stock RocketMQ 4.9.7's
``enableDLegerCommitLog=true`` (its DLedger library is dledger 0.3.1.2).

Three or more brokers of one ``dLegerGroup`` (``dLegerPeers=n0-host:port;n1-...``,
``dLegerSelfId``) keep one log: a leader is elected, every message is appended through it
as one entry whose body is the stored commit-log record, and it is acknowledged once a
quorum holds it. When the leader dies the others elect a new one.

Modules, from the bytes up (all sans-IO but ``mmap_store`` and ``server``):

=================  =======================================================================
``entry``          the entry and index-unit formats, byte for byte (``DLedgerEntry``)
``protocol``       peer RPC codes and fastjson bodies (vote, heartbeat, push, transfer)
``member_state``   group, peers, role, term and vote (``currterm``)
``log``            the ``RaftLog`` interface and ``MemoryLog``
``core``           ``RaftNode``: election, replication, commit (sans-IO, time passed in)
``mmap_store``     ``DLedgerMmapFileStore``: the durable log in ``dledger-<id>/data|index``
``server``         ``DLedgerServer``: a ``RaftNode`` on RocketMQ remoting (the peer port)
``commit_log``     ``DLedgerCommitLog``: the broker's commit log over the DLedger data
``store``          ``DLedgerMessageStore``: the broker's store in DLedger mode
=================  =======================================================================

Upstream: ``io.openmessaging.storage.dledger`` 0.3.1.2 and rocketmq 4.9.7's
``store/dledger/DLedgerCommitLog``, ``broker/dledger/DLedgerRoleChangeHandler``.
"""
