"""``NamesrvMetrics``: the nameserver's Prometheus families (see service.py for the lifecycle).

* ``rocketmq_requests_total{code}``, ``rocketmq_responses_total{code}``: remoting.py.
* ``rocketmq_brokers_live``: brokers in the live table (``brokerLiveTable``).
* ``rocketmq_topics``: topics with at least one route (``topicQueueTable``).
* ``rocketmq_connections``: open connections (brokers and clients).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .service import ServerMetrics

if TYPE_CHECKING:
    from ..namesrv.controller import NamesrvController

__all__ = ["NamesrvMetrics"]


class NamesrvMetrics(ServerMetrics):
    """The nameserver's families; ``attach(controller)`` once, before ``start()``."""

    def attach(self, controller: NamesrvController) -> None:
        registry = self.registry
        if registry is None:
            return
        routes = controller.routes
        registry.gauge_func("rocketmq_brokers_live", "Brokers in the live table.", (),
                            lambda: [((), len(routes.broker_live_table))])
        registry.gauge_func("rocketmq_topics", "Topics with at least one route.", (),
                            lambda: [((), len(routes.topic_queue_table))])
        registry.gauge_func("rocketmq_connections", "Open connections.", (),
                            lambda: [((), len(controller.server.channels))])
