"""``mqnamesrv``: run one nameserver until SIGTERM/SIGINT (upstream ``NamesrvStartup``).

Usage: ``python -m aiorocketmq.server.namesrv.main [-p PORT] [--host HOST] [-c namesrv.properties]
[--kv-path FILE] [--scan-interval-ms MS] [--broker-expired-ms MS] [--metrics-port PORT]
[--slow-request-ms MS] [--log-format ...] [--log-level ...]``.

* ``-c`` reads an upstream properties file (``listenPort``, ``kvConfigPath``,
  ``orderMessageEnable``, ...); as upstream, that file then becomes ``configStorePath``,
  where UPDATE_NAMESRV_CONFIG persists. Command-line flags win over the file.
* Without ``-c``, ``configStorePath`` is ``namesrv.properties`` next to the KV file, so a
  test that points ``--kv-path`` into a temporary directory writes nothing else elsewhere.
* Port 0 picks a free port. When ready, exactly one line goes to stdout (flushed):
  ``The Name Server boot success. serializeType=JSON address=<host>:<port>``; logs go to
  stderr. The host defaults to 127.0.0.1: listening on every interface (``0.0.0.0``)
  must be asked for.
* ``--metrics-port`` serves Prometheus metrics on ``GET /metrics`` (0 = any free port; the
  ``-c`` file's ``metricsPort`` otherwise) and prints ``metrics listening on <host>:<port>``
  after the readiness line; ``--slow-request-ms`` (default 1000, 0 = off) sets the
  ``remoting.slow_request`` threshold; ``--log-level DEBUG`` logs one line per request.
* Keys of the ``-c`` file that no setting reads are logged once the logging is set up:
  stock 4.9.7 keys we accept and do not use in one ``namesrv.config_keys_not_used`` info
  line, any other key in a ``namesrv.config_unknown_key`` warning naming the key it most
  likely meant (``did_you_mean``); both are kept, as upstream keeps them.
* Exit codes: 0 after a signal-initiated clean stop, 1 when the server cannot start
  (port taken, corrupt KV file), 2 for bad arguments or configuration. A start failure
  is one line on stderr, ``mqnamesrv: cannot listen on 127.0.0.1:9876: address already
  in use``, with no traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.codes import SerializeType
from aiorocketmq.protocol.runtime import (
    add_common_arguments,
    announce,
    configure_logging,
    read_properties_file,
    serve_until_signalled,
    system_properties,
)
from aiorocketmq.protocol.tls import TlsConfig
from aiorocketmq.server.metrics import NamesrvMetrics, add_metrics_arguments, metrics_options
from aiorocketmq.server.metrics.service import METRICS_PORT_KEY, SLOW_REQUEST_KEY

from .config import ConfigError, NamesrvConfig, config_key_report
from .controller import NamesrvController
from .kv_config import KVConfigLoadError

__all__ = ["main", "build_config", "READY_LINE"]

READY_LINE = "The Name Server boot success. serializeType={serialize} address={address}"

log = get_logger("aiorocketmq.namesrv")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mqnamesrv", description="RocketMQ nameserver")
    p.add_argument("-p", "--port", type=int, default=None,
                   help="listen port (default 9876, or listenPort from -c; 0 = any free port)")
    p.add_argument("--host", default=None,
                   help="listen address (default 127.0.0.1; 0.0.0.0 for every interface)")
    p.add_argument("-c", "--config-file", dest="config_file", default=None,
                   help="upstream namesrv properties file")
    p.add_argument("--kv-path", default=None, help="KV config file (kvConfigPath)")
    p.add_argument("--scan-interval-ms", type=int, default=None,
                   help="broker expiry scan period (scanNotActiveBrokerInterval, 10000)")
    p.add_argument("--broker-expired-ms", type=int, default=None,
                   help="silence after which a broker is removed (brokerChannelExpiredTime, "
                        "120000)")
    add_common_arguments(p)
    add_metrics_arguments(p)
    return p


def build_config(args: argparse.Namespace) -> NamesrvConfig:
    """The NamesrvConfig the arguments describe.

    Raises:
        ConfigError: a malformed value; OSError: an unreadable ``-c`` file.
    """
    props: dict[str, str] = {}
    if args.config_file:
        props = read_properties_file(args.config_file)
    config = NamesrvConfig.from_properties(props)
    if args.config_file:
        config.config_store_path = str(Path(args.config_file))
    overrides = {
        "listen_port": args.port,
        "bind_address": args.host,
        "kv_config_path": args.kv_path,
        "scan_not_active_broker_interval_ms": args.scan_interval_ms,
        "broker_channel_expired_time_ms": args.broker_expired_ms,
    }
    for attr, value in overrides.items():
        if value is not None:
            setattr(config, attr, value)
    if not args.config_file and args.kv_path:
        config.config_store_path = str(Path(args.kv_path).with_name("namesrv.properties"))
    # Flags bypass from_properties: check them with the same bounds.
    config.parse(config.to_properties())
    return config


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        config = build_config(args)
        metrics_port, slow_request_ms = metrics_options(args, config.extra)
    except (ConfigError, ValueError, OSError) as exc:
        print(f"mqnamesrv: {exc}", file=sys.stderr)
        return 2
    configure_logging(args.log_format, args.log_level)
    if args.config_file:
        _report_config_keys(args.config_file)
    metrics = NamesrvMetrics(metrics_port=metrics_port, host=config.bind_address,
                             slow_request_ms=slow_request_ms,
                             log_requests=args.log_level.upper() == "DEBUG")
    # -Dtls.server.mode=... and the other tls.* keys, as upstream's JVM properties
    controller = NamesrvController(config, metrics=metrics,
                                   tls=TlsConfig.from_properties(system_properties(args)))

    async def start() -> None:
        await controller.start()
        line = READY_LINE.format(serialize=SerializeType.JSON.name, address=controller.address)
        announce(line)
        if metrics.address is not None:
            announce(f"metrics listening on {metrics.address}")

    try:
        return serve_until_signalled(start, controller.stop)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if not reason.startswith("cannot listen"):
            reason = f"cannot start: {reason}" + (f": {exc.filename}" if exc.filename else "")
        print(f"mqnamesrv: {reason}", file=sys.stderr)
        return 1
    except KVConfigLoadError as exc:
        print(f"mqnamesrv: cannot start: {exc}", file=sys.stderr)
        return 1


def _report_config_keys(path: str) -> None:
    """Log the ``-c`` file's keys that no setting reads (the module docstring says how)."""
    props = read_properties_file(path)
    not_used, unknown = config_key_report(
        props, frozenset({METRICS_PORT_KEY, SLOW_REQUEST_KEY}))
    if not_used:
        log.info("namesrv.config_keys_not_used", keys=not_used, file=path,
                 reason="stock 4.9.7 keys this nameserver accepts and does not use")
    for key, close in unknown:
        log.warning("namesrv.config_unknown_key", key=key, file=path, did_you_mean=close,
                    action="kept")


if __name__ == "__main__":
    sys.exit(main())
