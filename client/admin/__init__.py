"""Admin client: ``MQAdmin`` (typed admin calls) and the ``mqadmin`` command line (``client.admin.cli``)."""

from .api import DEFAULT_TIMEOUT, BrokerInfo, MQAdmin

__all__ = ["MQAdmin", "BrokerInfo", "DEFAULT_TIMEOUT"]
