"""How aiorocketmq logs: structured events carried by the standard ``logging`` module.

Contract:

* Each module takes ``log = get_logger("aiorocketmq.<part>")`` and calls it the structlog way,
  ``log.info("client.instance.started", client_id=cid)``: a stable, documented event name and
  key/value context. The name is the stdlib logger's name, so the application picks levels
  and handlers per part (``aiorocketmq.client``, ``aiorocketmq.remoting``, ...).
* Records go to stdlib ``logging`` and nowhere else. structlog's global configuration is
  neither read nor changed: an application's own structlog setup is its business, and one
  that never configures structlog does not get our lines printed by structlog's defaults.
* The ``aiorocketmq`` logger carries a ``logging.NullHandler`` (added by the package's
  ``__init__``), the library convention: with no logging configured nothing is printed, not
  even stdlib's last-resort WARNING lines on stderr. Level and handlers belong to the
  application (``logging.basicConfig(level=logging.INFO)`` shows our info lines).
* A record's ``msg`` is an :class:`EventDict` and its ``args`` are empty. ``str()`` of it, what
  a plain ``logging.Formatter`` prints, is ``event key=value ...``; as a dict it holds
  ``event`` and the context, and the record carries ``_logger`` / ``_name`` as
  ``structlog.stdlib.ProcessorFormatter`` expects, so a structlog formatter renders it as its
  own event (the CLIs do, see ``aiorocketmq.protocol.runtime.configure_logging``).
  ``exc_info`` / ``stack_info`` become the record's, so formatters print the traceback.
* The level is checked before anything is built: a disabled call costs one
  ``Logger.isEnabledFor`` (cached by stdlib). The record points at the caller's line.
* ``alert(level, event, ...)`` is for the few events an application must not miss even
  when it configured no logging: an exception raised by its own listener, no reachable
  nameserver. It logs as the other methods do and, when no handler but our ``NullHandler``
  would take the record (``handled_by_application``), hands it to ``logging.lastResort``
  too: one ``event key=value`` line (and the traceback) on stderr, as stdlib prints a
  library's warnings when no handler exists. An application's own handler, or a level it set
  that disables the record, silences it as usual.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

__all__ = ["EventDict", "BoundLogger", "get_logger", "handled_by_application"]

_SIMPLE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:/@%+,")


def _render_value(value: Any) -> str:
    if isinstance(value, str) and value and _SIMPLE.issuperset(value):
        return value
    return repr(value)


class EventDict(dict[str, Any]):
    """A record's ``msg``: ``event`` plus key/values; ``str()`` is ``event key=value ...``."""

    __slots__ = ()

    def __str__(self) -> str:
        parts = [str(self.get("event"))]
        parts.extend(f"{k}={_render_value(v)}" for k, v in self.items() if k != "event")
        return " ".join(parts)


class BoundLogger:
    """A stdlib logger with structlog's calling convention (``event``, then key/values)."""

    __slots__ = ("_logger", "_context")

    def __init__(self, logger: logging.Logger, context: dict[str, Any] | None = None) -> None:
        self._logger = logger
        self._context = context or {}

    @property
    def name(self) -> str:
        return self._logger.name

    def bind(self, **context: Any) -> BoundLogger:
        """A logger adding ``context`` to every event it logs."""
        return BoundLogger(self._logger, {**self._context, **context})

    def is_enabled_for(self, level: int) -> bool:
        """Whether a call at ``level`` would make a record; guards costly arguments."""
        return self._logger.isEnabledFor(level)

    def debug(self, event: str, **kw: Any) -> None:
        self._log(logging.DEBUG, "debug", event, kw)

    def info(self, event: str, **kw: Any) -> None:
        self._log(logging.INFO, "info", event, kw)

    def warning(self, event: str, **kw: Any) -> None:
        self._log(logging.WARNING, "warning", event, kw)

    warn = warning

    def error(self, event: str, **kw: Any) -> None:
        self._log(logging.ERROR, "error", event, kw)

    def exception(self, event: str, **kw: Any) -> None:
        """``error`` with the exception being handled attached (``exc_info=True``)."""
        kw.setdefault("exc_info", True)
        self._log(logging.ERROR, "error", event, kw)

    def critical(self, event: str, **kw: Any) -> None:
        self._log(logging.CRITICAL, "critical", event, kw)

    def alert(self, level: int, event: str, **kw: Any) -> None:
        """Log ``event`` at ``level``; on stderr as well when the application has no handler
        for it (module docstring). ``exc_info=True`` attaches the exception being handled."""
        logger = self._logger
        if not logger.isEnabledFor(level):
            return
        exc_info = kw.pop("exc_info", None)
        if exc_info is True:
            exc_info = sys.exc_info()
        elif isinstance(exc_info, BaseException):
            exc_info = (type(exc_info), exc_info, exc_info.__traceback__)
        elif not isinstance(exc_info, tuple):
            exc_info = None
        self._log(level, logging.getLevelName(level).lower(), event,
                  {**kw, "exc_info": exc_info})
        last = logging.lastResort
        if last is None or level < last.level or handled_by_application(logger):
            return
        kw.pop("stack_info", None)
        ed = EventDict(event=event)
        ed.update(self._context)
        ed.update(kw)
        last.handle(logger.makeRecord(logger.name, level, "(alert)", 0, ed, (), exc_info))

    def _log(self, level: int, method: str, event: str, kw: dict[str, Any]) -> None:
        logger = self._logger
        if not logger.isEnabledFor(level):
            return
        exc_info = kw.pop("exc_info", None)
        stack_info = bool(kw.pop("stack_info", False))
        ed = EventDict(event=event)
        if self._context:
            ed.update(self._context)
        ed.update(kw)
        # stacklevel 3: past this method and the level method, to the line that logged.
        logger.log(level, ed, exc_info=exc_info, stack_info=stack_info, stacklevel=3,
                   extra={"_logger": logger, "_name": method})


def handled_by_application(logger: logging.Logger) -> bool:
    """Whether a record of ``logger`` reaches a handler other than a ``NullHandler`` (what
    stdlib's ``Logger.callHandlers`` walks: the logger and its ancestors while they
    propagate)."""
    current: logging.Logger | None = logger
    while current is not None:
        if any(not isinstance(h, logging.NullHandler) for h in current.handlers):
            return True
        if not current.propagate:
            return False
        current = current.parent
    return False


def get_logger(name: str) -> BoundLogger:
    """The logger of one part of the library; ``name`` starts with ``aiorocketmq.``."""
    return BoundLogger(logging.getLogger(name))
