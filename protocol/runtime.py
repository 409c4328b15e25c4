"""Process plumbing shared by ``mqnamesrv`` and ``mqbroker`` (and the client CLIs).

* ``configure_logging``: the root logger's one handler, rendering with structlog;
  human-readable console output by default, one JSON object per line with
  ``--log-format json``. Logs go to stderr; stdout carries only the servers' readiness
  lines (tests read them). Library code never calls it (see ``aiorocketmq.logs``).
* ``install_uvloop``: uvloop's event loop policy when importable.
* ``serve_until_signalled``: run a server coroutine until SIGTERM/SIGINT, then stop it.
* ``read_properties_file``: upstream's ``-c broker.conf`` / ``namesrv.properties`` files.
* ``announce``: one readiness line to stdout in one ``write(2)``, so the instances of
  ``mqbroker --instances N`` sharing a pipe never interleave their lines.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import structlog

__all__ = [
    "configure_logging",
    "install_uvloop",
    "serve_until_signalled",
    "read_properties_file",
    "add_common_arguments",
    "system_properties",
    "announce",
]

def configure_logging(fmt: str = "console", level: str = "INFO") -> None:
    """Give this process's root logger one stderr handler rendering events with structlog.

    For the CLIs (and scripts that want their output), never for library code: our modules
    log through stdlib ``logging`` (``aiorocketmq.logs``) and print nothing until someone
    configures it. Records from our loggers are rendered from their event dict; records
    from other libraries (asyncio, py4j, ...) get the same shape with their message as the
    event. A later call replaces the handler.
    """
    lvl = getattr(logging, level.upper(), logging.INFO)
    renderer: Any
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=False)
    formatter = _Formatter(
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
    )
    handler = _StderrHandler()
    handler.setFormatter(formatter)
    logging.basicConfig(level=lvl, handlers=[handler], force=True)


class _Formatter(structlog.stdlib.ProcessorFormatter):
    """ProcessorFormatter that also renders the traceback of our records: they carry it on
    the record (so plain formatters print it too), where ProcessorFormatter does not look."""

    def format(self, record: logging.LogRecord) -> str:
        msg = record.msg
        if record.exc_info and isinstance(msg, dict) and hasattr(record, "_logger") \
                and "exc_info" not in msg:
            record = logging.makeLogRecord(record.__dict__)
            record.msg = {**msg, "exc_info": record.exc_info}
        return super().format(record)


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is *now* (as stdlib's ``lastResort`` does).

    Binding the stream at configuration time breaks when it is later replaced (pytest's
    capture, a daemon redirecting stderr): every log call would then hit a closed file.
    """

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def install_uvloop() -> bool:
    """Use uvloop's event loop policy when it is importable; return whether it is in use."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a hard dependency on Linux
        return False
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return True


def read_properties_file(path: str | Path) -> dict[str, str]:
    """Parse an upstream-style properties file (``key=value`` lines, ``#`` comments)."""
    from aiorocketmq.protocol.bodies import string_to_properties

    text = Path(path).read_text(encoding="utf-8")
    return string_to_properties(text)


def announce(line: str) -> None:
    """Write ``line`` and its newline to stdout in a single ``write(2)``.

    ``print`` writes the text and the newline separately; two processes sharing the pipe
    (the instances of ``mqbroker --instances N``) could then produce
    ``The broker[a...]The broker[b...]`` followed by two newlines, and a reader would see
    one line. A pipe write of at most ``PIPE_BUF`` (4096) bytes is atomic, which a
    readiness line always is.
    """
    sys.stdout.flush()
    data = (line + "\n").encode()
    fd = sys.stdout.fileno()
    while data:
        data = data[os.write(fd, data):]


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def add_common_arguments(parser: Any) -> None:
    """Arguments every server CLI takes."""
    parser.add_argument("--log-format", choices=("console", "json"), default="console",
                        help="console (human readable, default) or json (one object per line)")
    # Checked here: an unknown level used to fall back to INFO without a word.
    parser.add_argument("--log-level", default="INFO", type=str.upper, choices=LOG_LEVELS,
                        help="DEBUG, INFO, WARNING or ERROR (default INFO)")
    parser.add_argument("-D", dest="system_properties", action="append", default=[],
                        metavar="KEY=VALUE",
                        help="a Java-style system property (repeatable), e.g. "
                             "-Drocketmq.home.dir=/opt/rocketmq or -Dtls.server.mode=enforcing")


def system_properties(args: Any) -> dict[str, str]:
    """The ``-Dkey=value`` options (upstream's JVM system properties: ``rocketmq.home.dir``,
    ``rocketmq.acl.plain.file``, ``tls.*``) as a dict; a bare ``-Dkey`` is ``""``."""
    props: dict[str, str] = {}
    for item in getattr(args, "system_properties", None) or ():
        key, _, value = item.partition("=")
        props[key.strip()] = value
    return props


def serve_until_signalled(
    start: Callable[[], Awaitable[Any]],
    stop: Callable[[], Awaitable[Any]],
) -> int:
    """Run ``start()``, wait for SIGTERM or SIGINT, run ``stop()``; return the exit code."""

    async def _main() -> int:
        loop = asyncio.get_running_loop()
        stopping = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stopping.set)
        await start()
        await stopping.wait()
        await stop()
        return 0

    install_uvloop()
    return asyncio.run(_main())
