"""``mqbroker`` = ``python -m aiorocketmq.server.broker.main``: run one broker until SIGTERM/SIGINT.

Upstream ``BrokerStartup``: ``-n namesrvAddr`` (``;``-separated, overrides the file; with
neither, ``NAMESRV_ADDR`` from the environment), ``-c broker.conf`` (upstream properties;
the stock 4.9.7 keys we accept and do not implement, ``sendMessageThreadPoolNums`` and the
like, are listed in one ``broker.config_keys_not_used`` info line, and any other key no
component reads is named in a ``broker.config_unknown_key`` warning with the key it likely
meant). Ours adds ``--host`` (bind address, default
127.0.0.1), ``--log-format`` and ``--log-level`` (DEBUG adds one line per request),
``--metrics-port`` (Prometheus ``GET /metrics``; file key ``metricsPort``) and
``--slow-request-ms`` (default 1000; file key ``slowRequestMillis``), and ``--instances N``
(a host's worth of brokers from one configuration, supervised: ``instances.py``). When ready it prints
exactly
``The broker[<brokerName>, <ip>:<port>] boot success. serializeType=JSON and name server is <namesrvAddr>``
to stdout (tests read the port from it), then, with metrics on,
``metrics listening on <host>:<port>``; logs go to stderr. SIGTERM shuts down cleanly
(exit 0). Failures to start are one line on stderr, no traceback: an unreadable ``-c``
file or a bad value (exit 2), the port in use, the store locked by another broker, a store
segment of another size than configured (exit 1).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import sys

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.codes import MixAll
from aiorocketmq.protocol.runtime import (
    add_common_arguments,
    announce,
    configure_logging,
    read_properties_file,
    serve_until_signalled,
    system_properties,
)
from aiorocketmq.server.metrics import BrokerMetrics, add_metrics_arguments, apply_metrics_arguments

from .config import load_broker_configs, unknown_broker_keys
from .config_update import STOCK_BROKER_KEYS
from .controller import BrokerController
from .instances import DEFAULT_PORT_STEP, run_instances

log = get_logger("aiorocketmq.broker")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mqbroker", description="aiorocketmq broker")
    parser.add_argument("-n", "--namesrv-addr", dest="namesrv_addr",
                        help="name server address list, e.g. 127.0.0.1:9876;127.0.0.2:9876")
    parser.add_argument("-c", "--config-file", dest="config_file",
                        help="broker configuration file (upstream broker.conf)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--instances", type=int, default=1, metavar="N",
                        help="run N brokers, each its own group (<brokerName>-<i>, listenPort + "
                             "i * --instances-port-step, <storePathRootDir>/instance-<i>), "
                             "supervised by this process; default 1: this process is the broker")
    parser.add_argument("--instances-port-step", type=int, default=DEFAULT_PORT_STEP,
                        metavar="STEP", help=f"listenPort step between instances "
                                             f"(default {DEFAULT_PORT_STEP})")
    parser.add_argument("--instances-stop-timeout", type=float, default=30.0, metavar="S",
                        help="seconds an instance has to stop on SIGTERM before SIGKILL")
    add_common_arguments(parser)
    add_metrics_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(args.log_format, args.log_level)
    props: dict[str, str] = {}
    if args.config_file:
        try:
            props.update(read_properties_file(args.config_file))
        except (OSError, UnicodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            print(f"mqbroker: cannot read configuration file {args.config_file}: {reason}",
                  file=sys.stderr)
            return 2
        not_used = []
        for key, close in unknown_broker_keys(props):
            if key in STOCK_BROKER_KEYS:
                not_used.append(key)
                continue
            log.warning("broker.config_unknown_key", key=key, file=args.config_file,
                        did_you_mean=close, action="ignored")
        if not_used:
            log.info("broker.config_keys_not_used", keys=sorted(not_used), file=args.config_file,
                     reason="stock 4.9.7 keys this broker accepts and does not use")
    # BrokerStartup: -n wins over the file, whose namesrvAddr wins over NAMESRV_ADDR
    # (BrokerConfig's default, NameServerAddressUtils.getNameServerAddresses).
    env_addr = os.environ.get(MixAll.NAMESRV_ADDR_ENV, "").strip()
    if args.namesrv_addr:
        props["namesrvAddr"] = args.namesrv_addr
    elif not props.get("namesrvAddr") and env_addr:
        props["namesrvAddr"] = env_addr
    if args.instances != 1:
        return _run_instances(args, props)
    try:
        config, store_config = load_broker_configs(props)
        config = apply_metrics_arguments(args, config)
    except ValueError as exc:
        print(f"mqbroker: bad configuration: {exc}", file=sys.stderr)
        return 2
    metrics = BrokerMetrics(metrics_port=config.metrics_port, host=args.host,
                            slow_request_ms=config.slow_request_ms,
                            log_requests=args.log_level.upper() == "DEBUG")
    # -D: rocketmq.home.dir (else ROCKETMQ_HOME), rocketmq.acl.plain.file, tls.* (upstream's
    # JVM system properties; see server/broker/acl/ and protocol/tls.py)
    broker = BrokerController(config, store_config, host=args.host, metrics=metrics,
                              system_properties=system_properties(args),
                              config_path=args.config_file)

    async def start() -> None:
        try:
            await broker.start()
        except BaseException:
            with contextlib.suppress(Exception):
                await broker.shutdown()  # release the port, the store lock and the files
            raise
        announce(f"The broker[{config.broker_name}, {config.broker_addr}] boot success. "
                 f"serializeType=JSON and name server is {config.namesrv_addr}")
        if metrics.address is not None:
            announce(f"metrics listening on {metrics.address}")

    try:
        return serve_until_signalled(start, broker.shutdown)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            reason = f"cannot listen on {args.host}:{config.listen_port}: address already in use"
        else:
            reason = f"cannot start: {exc.strerror or exc}" + (
                f": {exc.filename}" if exc.filename else "")
        print(f"mqbroker: {reason}", file=sys.stderr)
        return 1
    except (RuntimeError, ValueError) as exc:  # the store locked or unreadable, a segment of the wrong size
        print(f"mqbroker: cannot start: {exc}", file=sys.stderr)
        return 1


def _run_instances(args: argparse.Namespace, props: dict[str, str]) -> int:
    """``--instances N``: this process supervises N brokers (``instances.py``)."""
    if args.metrics_port is not None:
        props["metricsPort"] = str(args.metrics_port)
    if args.slow_request_ms is not None:
        props["slowRequestMillis"] = str(args.slow_request_ms)
    child_args = ["--host", args.host, "--log-format", args.log_format, "--log-level", args.log_level,
                  *(f"-D{item}" for item in args.system_properties)]
    return run_instances(args.instances, props, child_args, port_step=args.instances_port_step,
                         stop_timeout=args.instances_stop_timeout)


if __name__ == "__main__":
    sys.exit(main())
