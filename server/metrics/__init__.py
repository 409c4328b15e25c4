"""Operator metrics: a bounded registry, Prometheus text exposition and a tiny HTTP endpoint.

``registry.py`` (families, bounding, the 0.0.4 text format), ``http.py`` (``GET /metrics``),
``remoting.py`` (the per-request observer: counts, slow-request and DEBUG request lines),
``service.py`` (one process's lifecycle), ``broker.py`` and ``namesrv.py`` (their families).
"""

from .broker import BrokerMetrics
from .http import MetricsHttpServer
from .namesrv import NamesrvMetrics
from .registry import (
    CONTENT_TYPE,
    LATENCY_BUCKETS,
    OTHER,
    Counter,
    Gauge,
    Histogram,
    Registry,
)
from .remoting import RemotingObserver
from .service import (
    DEFAULT_SLOW_REQUEST_MS,
    ServerMetrics,
    add_metrics_arguments,
    apply_metrics_arguments,
    metrics_options,
)

__all__ = [
    "BrokerMetrics",
    "NamesrvMetrics",
    "ServerMetrics",
    "MetricsHttpServer",
    "RemotingObserver",
    "Registry",
    "Counter",
    "Gauge",
    "Histogram",
    "OTHER",
    "CONTENT_TYPE",
    "LATENCY_BUCKETS",
    "DEFAULT_SLOW_REQUEST_MS",
    "add_metrics_arguments",
    "apply_metrics_arguments",
    "metrics_options",
]
