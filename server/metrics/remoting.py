"""``RemotingObserver``: the per-request hook a server hands to its channels.

Contract (``protocol.channel.RequestObserver``; docs/ARCHITECTURE.md "Processor contract"):

* ``request_started`` runs at dispatch, before the handler, and returns the start time
  (``time.perf_counter``: uvloop's ``loop.time()`` only advances between iterations, so it
  would read 0 for every inline handler).
* ``request_finished`` runs once per dispatched request when its handler is done: with the
  response just queued for writing, or ``None`` when nothing was written (oneway, or the
  handler kept the request to answer later, e.g. a parked pull). It counts the response
  code, logs ``remoting.slow_request`` (WARNING: code, peer, opaque, elapsed_ms) when the
  time from dispatch to the response being queued for writing (for a oneway request: to
  its handler's end) reached ``slow_request_ms``, and with ``log_requests`` one DEBUG
  ``remoting.request`` line (code, opaque, peer, duration_ms, response code). A kept
  request is never slow: a long-poll hold is the normal case.
* ``late_response`` runs for a response written later with ``Channel.send_response``
  (a woken or expired long poll): counted, DEBUG-logged, never timed.

Metrics (when a registry is given): ``rocketmq_requests_total{code}`` and
``rocketmq_responses_total{code}``, ``code`` being the RequestCode / ResponseCode name
(the number for codes we do not know; bounded like every family). The per-code child is
looked up in a small dict keyed by the int code, so a count is one dict get and an add.
"""

from __future__ import annotations

import time
from typing import Any

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.codes import RequestCode, ResponseCode, RpcFlag
from aiorocketmq.protocol.command import RemotingCommand

from .registry import CounterChild, Registry

__all__ = ["RemotingObserver", "request_code_name", "response_code_name"]

log = get_logger("aiorocketmq.remoting")

_perf = time.perf_counter
_ONEWAY = int(RpcFlag.ONEWAY)
_REQUEST_NAMES = {int(c): c.name for c in RequestCode}
_RESPONSE_NAMES = {int(c): c.name for c in ResponseCode}


def request_code_name(code: int) -> str:
    return _REQUEST_NAMES.get(code) or str(code)


def response_code_name(code: int) -> str:
    return _RESPONSE_NAMES.get(code) or str(code)


class _CodeCounter:
    """A counter family keyed by a wire code, with the int -> child lookup cached."""

    __slots__ = ("_family", "_names", "_cache", "_limit")

    def __init__(self, registry: Registry, name: str, help: str, names: dict[int, str]) -> None:
        self._family = registry.counter(name, help, ("code",))
        self._names = names
        self._cache: dict[int, CounterChild] = {}
        self._limit = self._family.max_series + 1  # the folded ``other`` child included

    def child(self, code: int) -> CounterChild:
        child = self._cache.get(code)
        if child is None:
            child = self._family.labels(self._names.get(code) or str(code))
            if len(self._cache) < self._limit:
                self._cache[code] = child
        return child


class RemotingObserver:
    """Counts and times the requests of every channel of one server; see the module docstring.

    Args:
        registry: where the request/response counters live; ``None`` counts nothing.
        slow_request_ms: log requests that took at least this long; ``<= 0`` disables.
        log_requests: one DEBUG line per request (``--log-level DEBUG``).
    """

    __slots__ = ("_requests", "_responses", "_slow_s", "_log_requests")

    def __init__(self, registry: Registry | None = None, *, slow_request_ms: float = 1000.0,
                 log_requests: bool = False) -> None:
        self._requests: _CodeCounter | None = None
        self._responses: _CodeCounter | None = None
        if registry is not None:
            self._requests = _CodeCounter(
                registry, "rocketmq_requests_total",
                "Requests received, by request code.", _REQUEST_NAMES)
            self._responses = _CodeCounter(
                registry, "rocketmq_responses_total",
                "Responses written, by response code.", _RESPONSE_NAMES)
        self._slow_s = slow_request_ms / 1000 if slow_request_ms > 0 else float("inf")
        self._log_requests = log_requests

    @property
    def slow_request_ms(self) -> float:
        return self._slow_s * 1000

    def request_started(self, channel: Any, request: RemotingCommand) -> float:
        requests = self._requests
        if requests is not None:
            requests.child(request.code).value += 1
        return _perf()

    def request_finished(self, channel: Any, request: RemotingCommand,
                         response: RemotingCommand | None, started: float) -> None:
        elapsed = _perf() - started
        if response is None:
            answer = None
            timed = bool(request.flag & _ONEWAY)  # kept (held) requests are not timed
        else:
            answer = response.code
            timed = True
            responses = self._responses
            if responses is not None:
                responses.child(answer).value += 1
        if timed and elapsed >= self._slow_s:
            log.warning("remoting.slow_request", code=request_code_name(request.code),
                        peer=channel.remote_addr, opaque=request.opaque,
                        elapsed_ms=round(elapsed * 1000, 3),
                        response=None if answer is None else response_code_name(answer))
        if self._log_requests:
            log.debug("remoting.request", code=request_code_name(request.code),
                      opaque=request.opaque, peer=channel.remote_addr,
                      duration_ms=round(elapsed * 1000, 3),
                      response=None if answer is None else response_code_name(answer))

    def late_response(self, channel: Any, response: RemotingCommand) -> None:
        responses = self._responses
        if responses is not None:
            responses.child(response.code).value += 1
        if self._log_requests:
            log.debug("remoting.late_response", opaque=response.opaque, peer=channel.remote_addr,
                      response=response_code_name(response.code))
