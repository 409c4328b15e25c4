"""DLedger's wire facts, sans-IO, shared by the DLedger store (server/store/dledger/) and
mqadmin's ``leadershipTransfer``: ``entry`` (the entry and index unit formats) and ``wire``
(the peer RPCs and ``dLegerPeers``)."""
