"""Master/slave replication of the commit log: RocketMQ 4.9's HA (not DLedger).

One concept per module, as upstream's ``org.apache.rocketmq.store.ha`` package:

* ``wire``: the HA byte protocol, sans-IO (``HAConnection`` / ``HAService.HAClient``
  buffer handling): slave offset reports and the master's transfer frames.
* ``group_transfer``: SYNC_MASTER waits, ``HAService.GroupTransferService``.
* ``connection``: one slave on the master, ``HAConnection`` (read and write services).
* ``client``: the slave's side, ``HAService.HAClient``.
* ``service``: ``HAService``, which owns the HA listener, the connections, the group
  transfer and the client, and answers ``isSlaveOK``.
"""

from .group_transfer import GroupTransferService
from .service import HAService

__all__ = ["HAService", "GroupTransferService"]
