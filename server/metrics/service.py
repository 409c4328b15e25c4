"""``ServerMetrics``: one server process's registry, request observer and HTTP endpoint.

Contract: built from the command-line choices before the server exists (the
``observer`` must be handed to the ``RemotingServer`` at construction), then ``start()``
after the server is up and ``stop()`` first thing at shutdown.

* ``metrics_port`` ``None``: no registry and no HTTP endpoint; a request observer is still
  made when slow-request logging (``slow_request_ms`` > 0) or per-request DEBUG lines
  (``log_requests``) are on, and none at all otherwise (channels then pay nothing).
* ``metrics_port`` 0 binds any free port; ``address`` reports ``host:port`` once started.
* Every registry starts with ``rocketmq_event_loop_tasks``: the asyncio tasks of the
  server's event loop not yet done, counted at scrape time (a leak shows as growth;
  ``bench/soak.py`` prints it every minute).

``add_metrics_arguments`` gives ``mqbroker`` and ``mqnamesrv`` the same ``--metrics-port`` and
``--slow-request-ms`` flags, which win over the properties-file keys ``metricsPort`` and
``slowRequestMillis``: ``metrics_options`` reads the keys from a raw properties map (the
nameserver's extra keys), ``apply_metrics_arguments`` lays the flags over a config record that
has them as fields (``BrokerConfig.metrics_port`` / ``slow_request_ms``, so GET_BROKER_CONFIG
shows the values in use).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

from .http import MetricsHttpServer
from .registry import Registry
from .remoting import RemotingObserver

__all__ = ["ServerMetrics", "DEFAULT_SLOW_REQUEST_MS", "add_metrics_arguments",
           "apply_metrics_arguments", "metrics_options"]

DEFAULT_SLOW_REQUEST_MS = 1000.0
METRICS_PORT_KEY = "metricsPort"
SLOW_REQUEST_KEY = "slowRequestMillis"

_Config = TypeVar("_Config")


def add_metrics_arguments(parser: Any) -> None:
    """``--metrics-port`` and ``--slow-request-ms`` on a server's argparse parser."""
    parser.add_argument("--metrics-port", type=int, default=None,
                        help="serve Prometheus metrics on GET /metrics at this port "
                             f"(0 = any free port; default off; file key {METRICS_PORT_KEY})")
    parser.add_argument("--slow-request-ms", type=float, default=None,
                        help="log remoting.slow_request for requests answered after this many "
                             f"ms (default {DEFAULT_SLOW_REQUEST_MS:g}; 0 = off; "
                             f"file key {SLOW_REQUEST_KEY})")


def metrics_options(args: Any, props: Mapping[str, str] | None = None
                    ) -> tuple[int | None, float]:
    """``(metrics_port or None, slow_request_ms)`` from the flags, else the file's keys.

    Raises:
        ValueError: a malformed or out-of-range value (names the key).
    """
    props = props or {}
    port: int | None = args.metrics_port
    if port is None and props.get(METRICS_PORT_KEY, "").strip():
        try:
            port = int(props[METRICS_PORT_KEY].strip())
        except ValueError:
            raise ValueError(f"{METRICS_PORT_KEY} is not a number: "
                             f"{props[METRICS_PORT_KEY]!r}") from None
    if port is not None and not 0 <= port <= 65535:
        raise ValueError(f"{METRICS_PORT_KEY} must be 0..65535, got {port}")
    slow: float | None = args.slow_request_ms
    if slow is None and props.get(SLOW_REQUEST_KEY, "").strip():
        try:
            slow = float(props[SLOW_REQUEST_KEY].strip())
        except ValueError:
            raise ValueError(f"{SLOW_REQUEST_KEY} is not a number: "
                             f"{props[SLOW_REQUEST_KEY]!r}") from None
    return port, DEFAULT_SLOW_REQUEST_MS if slow is None else slow


def apply_metrics_arguments(args: Any, config: _Config) -> _Config:
    """``config`` (a dataclass with ``metrics_port`` and ``slow_request_ms`` fields) with the
    ``--metrics-port`` / ``--slow-request-ms`` flags that were given laid over it.

    Raises:
        ValueError: the dataclass's own check refused a flag's value (names the key).
    """
    changes: dict[str, Any] = {}
    if args.metrics_port is not None:
        changes["metrics_port"] = args.metrics_port
    if args.slow_request_ms is not None:
        changes["slow_request_ms"] = args.slow_request_ms
    if not changes:
        return config
    return dataclasses.replace(config, **changes)  # type: ignore[type-var]  # any dataclass


def _event_loop_tasks() -> list[tuple[tuple[str, ...], float]]:
    try:
        return [((), len(asyncio.all_tasks()))]
    except RuntimeError:  # rendered outside the loop (a test's direct render()): none running
        return [((), 0)]


class ServerMetrics:
    """See the module docstring; subclasses add their families in ``attach``."""

    def __init__(self, *, metrics_port: int | None = None, host: str = "127.0.0.1",
                 slow_request_ms: float = DEFAULT_SLOW_REQUEST_MS,
                 log_requests: bool = False) -> None:
        if metrics_port is not None and not 0 <= metrics_port <= 65535:
            raise ValueError(f"metrics port must be 0..65535, got {metrics_port}")
        self.registry: Registry | None = Registry() if metrics_port is not None else None
        if self.registry is not None:
            self.registry.gauge_func(
                "rocketmq_event_loop_tasks", "asyncio tasks of the event loop not yet done.",
                (), _event_loop_tasks)
        self.observer: RemotingObserver | None = None
        if self.registry is not None or slow_request_ms > 0 or log_requests:
            self.observer = RemotingObserver(self.registry, slow_request_ms=slow_request_ms,
                                             log_requests=log_requests)
        self.http: MetricsHttpServer | None = None
        if self.registry is not None:
            assert metrics_port is not None
            self.http = MetricsHttpServer(self.registry.render, host=host, port=metrics_port)

    @property
    def enabled(self) -> bool:
        return self.registry is not None

    @property
    def address(self) -> str | None:
        """``host:port`` of the HTTP endpoint once started, else ``None``."""
        http = self.http
        return http.address if http is not None and http.serving else None

    async def start(self) -> None:
        """Start the HTTP endpoint (if any). Raises ``OSError`` if its port is taken."""
        if self.http is not None:
            await self.http.start()

    async def stop(self) -> None:
        """Stop the HTTP endpoint. Idempotent."""
        if self.http is not None:
            await self.http.stop()
