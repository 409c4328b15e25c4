"""``mqdashboard``: serve the operator's web dashboard for one cluster.

::

    mqdashboard -n 127.0.0.1:9876 [--host 127.0.0.1] [--port 8080] [-c dashboard.toml]
    mqdashboard hash-password            # reads a password on stdin, prints its scrypt hash

Without ``-n`` the nameserver list comes from the config file, else ``NAMESRV_ADDR``. Once
listening it prints ``mqdashboard listening on http://HOST:PORT namesrv=...`` on stdout
(port 0 picks a free port; tests read that line), logs with structlog on stderr
(``--log-format json`` for one object per line) and stops cleanly on SIGTERM / SIGINT.
A bad setting is one line on stderr and exit code 2; so is a ``--host`` beyond loopback
without ``[users]`` (everyone would be an anonymous admin) unless ``--allow-anonymous-remote``.
"""

from __future__ import annotations

import argparse
import getpass
import importlib.metadata
import sys
from collections.abc import Sequence
from typing import Any

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.runtime import add_common_arguments, configure_logging

from .auth import hash_password
from .config import DashboardConfig, DashboardConfigError, is_loopback, load_config_file

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mqdashboard", description="Web dashboard for a RocketMQ cluster "
        "(cluster, topics, consumer groups, messages, connections, live TPS and lag).")
    parser.add_argument("command", nargs="?", choices=("serve", "hash-password"),
                        default="serve", help="serve (default) or hash-password")
    parser.add_argument("-n", "--namesrv-addr", default=None,
                        help="name server list host:port;host:port (default: NAMESRV_ADDR)")
    parser.add_argument("-c", "--config", default=None, help="TOML config file (users, acl, ...)")
    parser.add_argument("--host", default=None, help="listen address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=None,
                        help="listen port (default 8080; 0: any free port)")
    parser.add_argument("--sample-interval-ms", type=int, default=None,
                        help="live chart sample period (default 5000)")
    parser.add_argument("--allow-anonymous-remote", action="store_true", default=None,
                        help="without [users], serve a --host beyond loopback anyway (every "
                             "visitor is an anonymous admin); refused otherwise")
    add_common_arguments(parser)
    return parser


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    settings: dict[str, Any] = load_config_file(args.config) if args.config else {}
    for key, value in (("namesrv_addr", args.namesrv_addr), ("host", args.host),
                       ("port", args.port), ("sample_interval_ms", args.sample_interval_ms),
                       ("allow_anonymous_remote", args.allow_anonymous_remote)):
        if value is not None:
            settings[key] = value
    return settings


def _hash_password() -> int:
    if sys.stdin.isatty():
        password = getpass.getpass("password: ")
        if getpass.getpass("again: ") != password:
            print("mqdashboard hash-password: the passwords differ", file=sys.stderr)
            return 2
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        print("mqdashboard hash-password: empty password", file=sys.stderr)
        return 2
    print(hash_password(password))
    return 0


def _dashboard_extra_hint() -> str:
    """How to install the ``dashboard`` extra: its requirements as this installation lists
    them (aiorocketmq is not on a package index, so ``pip install 'aiorocketmq[dashboard]'``
    finds nothing), or from a checkout."""
    try:
        requires = importlib.metadata.requires("aiorocketmq") or []
    except importlib.metadata.PackageNotFoundError:
        requires = []
    extra = [str(r.split(";", 1)[0]).strip() for r in requires
             if 'extra == "dashboard"' in r.replace("'", '"')]
    direct = f"pip install {' '.join(repr(r) for r in extra)}; or " if extra else ""
    return (f"{direct}from a checkout of aiorocketmq: pip install '.[dashboard]' "
            "(README.md, Two commands)")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the dashboard until SIGTERM / SIGINT; the exit code."""
    args = build_parser().parse_args(argv)
    if args.command == "hash-password":
        return _hash_password()
    try:
        config = DashboardConfig.from_settings(_settings(args))
    except DashboardConfigError as exc:
        print(f"mqdashboard: {exc}", file=sys.stderr)
        return 2
    try:
        from aiohttp import web

        from .app import build_app
    except ImportError as exc:
        print(f"mqdashboard: {exc.name} is missing: {_dashboard_extra_hint()}", file=sys.stderr)
        return 2
    from aiorocketmq.protocol.runtime import serve_until_signalled

    configure_logging(args.log_format, args.log_level)
    if not config.login_required and not is_loopback(config.host):
        get_logger("aiorocketmq.dashboard").warning(
            "dashboard.anonymous_remote_admin", host=config.host,
            reason="no [users]: every visitor acts as an anonymous admin "
                   "(--allow-anonymous-remote)")
    runner: web.AppRunner | None = None

    async def start() -> None:
        nonlocal runner
        runner = web.AppRunner(build_app(config), access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, config.host, config.port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise SystemExit(f"mqdashboard: cannot listen on {config.host}:{config.port}: "
                             f"{exc.strerror}") from None
        host, port = runner.addresses[0][:2]
        print(f"mqdashboard listening on http://{host}:{port} namesrv={config.namesrv_addr}",
              flush=True)

    async def stop() -> None:
        if runner is not None:
            await runner.cleanup()

    return serve_until_signalled(start, stop)


if __name__ == "__main__":
    sys.exit(main())
