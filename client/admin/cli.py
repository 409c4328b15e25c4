"""``mqadmin``: upstream's admin commands, names and flags (``tools/command/**``), over ``MQAdmin``.

``mqadmin <command> [-n host:port] [flags] [--json]``; without ``-n``, ``NAMESRV_ADDR``
from the environment, as upstream. The commands live in ``client/admin/commands/``, one
module per family, each command one decorated coroutine holding its name, options, help
and handler (``commands/base.py``, as upstream's ``SubCommand``); this module walks that
registry to build the parser, runs the command and prints its ``Output``: ``data``
(JSON-ready, printed by ``--json``) or ``text`` (the readable table, laid out with
upstream's printf widths). Expected failures (connection refused, timeout, unknown topic
or group, a refusal from a server, bad arguments) print one line
``mqadmin <command>: <what went wrong>`` on stderr and exit 1 (2 for bad usage); no
traceback.

The formatting helpers are re-exported here for the unit tests.
"""

# UP031: %-formatting on purpose, so each table reads like the upstream printf it mirrors.
# ruff: noqa: UP031

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from aiorocketmq.protocol.errors import MQBrokerError, MQClientError, ProtocolError, RemotingError
from aiorocketmq.protocol.runtime import configure_logging

from . import acl as acl_admin
from .api import MQAdmin, namesrv_addr_from_env
from .commands import load
from .commands.base import EXPECTED, REGISTRY, Command, Output, UsageError
from .commands.broker import format_cluster_list
from .commands.consumer import format_consumer_progress
from .commands.formatting import (
    describe_error,
    format_date,
    format_human_ms,
    format_subscription_group_config,
    format_topic_config,
    java_map_string,
    parse_timestamp,
    perm_to_string,
)
from .commands.message import BODY_DIR, format_message, format_message_tracks
from .commands.topic import format_topic_status

__all__ = [
    "main",
    "build_parser",
    "Command",
    "Output",
    "UsageError",
    "parse_timestamp",
    "format_date",
    "format_human_ms",
    "format_cluster_list",
    "format_consumer_progress",
    "format_topic_status",
    "format_message",
    "format_message_tracks",
    "format_topic_config",
    "format_subscription_group_config",
    "java_map_string",
    "perm_to_string",
    "describe_error",
    "usage_text",
    "BODY_DIR",
]


class _Parser(argparse.ArgumentParser):
    """Usage errors become one line and exit code 2 (never a traceback)."""

    def error(self, message: str) -> NoReturn:
        words = self.prog.split()
        hint = f"mqadmin {words[-1]} -h" if len(words) > 1 else "mqadmin -h"
        raise UsageError(f"{message} (see '{hint}')")


def _add(sub: Any, name: str, cmd: Command) -> None:
    """One command's parser: the options every command has, then its own."""
    p: argparse.ArgumentParser = sub.add_parser(name, help=cmd.help, description=cmd.help)
    p.add_argument("-n", "--namesrvAddr", default=None,
                   help="name server address list, e.g. 127.0.0.1:9876;192.168.0.1:9876 "
                        "(default: the NAMESRV_ADDR environment variable)")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.add_argument("--timeout", type=float, default=3.0, help="seconds per request (default 3)")
    cmd.add_options(p)


def build_parser() -> argparse.ArgumentParser:
    """A subparser for every registered command, in listing order."""
    parser = _Parser(prog="mqadmin", description="aiorocketmq admin tool (upstream mqadmin commands)")
    sub = parser.add_subparsers(dest="command", metavar="<command>", parser_class=_Parser)
    sub.required = True
    for name, cmd in load().items():
        _add(sub, name, cmd)
    return parser


# -- entry point ----------------------------------------------------------------------------


async def _run(args: argparse.Namespace) -> Output:
    run = REGISTRY[args.command].run
    # As stock MQAdminStartup: sign with $ROCKETMQ_HOME/conf/tools.yml when it has keys.
    async with MQAdmin(args.namesrvAddr or namesrv_addr_from_env(), timeout=args.timeout,
                       rpc_hook=acl_admin.tools_rpc_hook()) as admin:
        return await run(admin, args)


def _quiet_logs() -> None:
    """Library logs go to stderr, warnings and up: stdout carries only the command's output."""
    configure_logging("console", "WARNING")


def usage_text() -> str:
    """``MQAdminStartup.printHelp``: every command with its description."""
    lines = ["The most commonly used mqadmin commands are:\n"]
    lines.extend("   %-20s %s\n" % (name, cmd.help) for name, cmd in load().items())
    lines.append("\nSee 'mqadmin help <command>' for more information on a specific command.\n")
    return "".join(lines)


def _startup(parser: argparse.ArgumentParser, argv: list[str]) -> int | None:
    """``MQAdminStartup.main0`` before a command runs: no arguments print the command list,
    ``help <command>`` its options; an unknown command is one line on stderr (exit 1).
    None: go on and run the command."""
    if not argv:
        sys.stdout.write(usage_text())
        return 0
    if argv[0] in ("-h", "--help"):
        sys.stdout.write(usage_text())
        return 0
    name = argv[1] if argv[0] == "help" and len(argv) == 2 else argv[0]
    if name not in load():
        print(f"The sub command {name} not exist.", file=sys.stderr)
        return 1
    if argv[0] == "help":
        parser.parse_args([name, "-h"])  # prints the command's help and exits 0
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; the process exit code (0 ok, 1 failure, 2 usage)."""
    _quiet_logs()
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    name = "mqadmin"
    try:
        early = _startup(parser, argv)
        if early is not None:
            return early
        args = parser.parse_args(argv)
        name = f"mqadmin {args.command}"
        output = asyncio.run(_run(args))
    except UsageError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 2
    except (MQBrokerError, RemotingError, MQClientError, ProtocolError) as exc:
        print(f"{name}: {describe_error(exc)}", file=sys.stderr)
        return 1
    except EXPECTED as exc:
        print(f"{name}: {describe_error(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    if args.json:
        sys.stdout.write(json.dumps(output.data, indent=1, sort_keys=True, default=str) + "\n")
    else:
        sys.stdout.write(output.text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
