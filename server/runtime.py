"""Process plumbing shared by ``mqnamesrv`` and ``mqbroker`` (and the client CLIs).

* ``configure_logging``: structlog configured once per process; human-readable console
  output by default, one JSON object per line with ``--log-format json``. Logs go to
  stderr; stdout carries only the servers' readiness lines (tests read them).
* ``install_uvloop``: uvloop's event loop policy when importable.
* ``serve_until_signalled``: run a server coroutine until SIGTERM/SIGINT, then stop it.
* ``read_properties_file``: upstream's ``-c broker.conf`` / ``namesrv.properties`` files.
"""

from __future__ import annotations

import asyncio
import logging
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
]

def configure_logging(fmt: str = "console", level: str = "INFO") -> None:
    """Configure structlog (and stdlib logging underneath) for this process; a later call replaces it."""
    lvl = getattr(logging, level.upper(), logging.INFO)
    logging.basicConfig(stream=sys.stderr, level=lvl, format="%(message)s", force=True)
    renderer: Any
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=False)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=_StderrLoggerFactory(),
        cache_logger_on_first_use=True,
    )


class _StderrLogger:
    """Writes each rendered line to whatever ``sys.stderr`` is *now*.

    Binding the stream at configuration time breaks when it is later replaced (pytest's
    capture, a daemon redirecting stderr): every log call would then hit a closed file.
    """

    def msg(self, message: str) -> None:
        stream = sys.stderr
        stream.write(message + "\n")
        stream.flush()

    log = debug = info = warn = warning = error = critical = exception = fatal = msg


class _StderrLoggerFactory:
    def __call__(self, *args: Any) -> _StderrLogger:
        return _StderrLogger()


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


def add_common_arguments(parser: Any) -> None:
    """Arguments every server CLI takes."""
    parser.add_argument("--log-format", choices=("console", "json"), default="console",
                        help="console (human readable, default) or json (one object per line)")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ERROR")


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
