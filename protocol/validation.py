"""Request values checked at the servers' edge, before any processor stores or acts on them.

Contract: ``RequestCheck(rules, json_body).check(request)`` returns ``None`` for a request
whose values are acceptable, else a remark naming the field and the reason; the servers
answer such a request with SYSTEM_ERROR and that remark and change nothing.
``guard(handler, check, on_refused, header)`` wraps a processor-table handler (plain or
coroutine alike) so the check runs first and, with ``header``, the request's header is
decoded once into ``request.header`` for the handler. Each code's ``rules``,
``json_body`` and header class are in its spec (``protocol/request_specs.py``,
``RequestSpec.edge``, ``edge_header``). Sans-IO: no logging here; ``on_refused`` is the
server's hook for that.

What is checked, for every request code:

* every ``extFields`` key and value is Unicode text that UTF-8 can carry. JSON may carry a
  lone UTF-16 surrogate (``"G\\ud800"``); Java keeps it in a String and writes ``?`` when
  it encodes, Python cannot encode it at all, so one such name stored in a table would
  make every later write of that table fail;
* for codes whose spec says ``json_body``, the JSON body holds no lone surrogate either;

and per request code, the fields its ``rules`` name (``FieldCheck`` functions, below):

* topic names: upstream ``TopicValidator.validateTopic`` (blank, ``^[%|a-zA-Z0-9_-]+$``,
  127 characters) with its remarks, which the stock broker answers with SYSTEM_ERROR;
  ``%RETRY%<group>`` / ``%DLQ%<group>`` topics are held to the group rule instead;
* group names: upstream client ``Validators.checkGroup`` (blank, 255 characters, the same
  character set) with its remarks, prefixed by the field name: the stock broker checks
  nothing here, its client does;
* queue counts: 0..``MAX_QUEUE_NUMS``, the same bound the nameserver holds a registered
  topic config to (a broker that accepted more could never register again);
* perm: the ``PermName`` bits only (PRIORITY 8, READ 4, WRITE 2, INHERIT 1);
* queue ids: 0..``MAX_QUEUE_NUMS`` - 1 where they key stored offsets.

A value that does not parse as a number is left to the header decoder, which answers
with its own remark.

Upstream: ``common/topic/TopicValidator.java``, ``client/Validators.java``,
``common/constant/PermName.java``.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiorocketmq import refuse_extension

from .bodies import TopicConfig
from .codes import MixAll, Perm, ResponseCode
from .command import RemotingCommand
from .errors import ProtocolError
from .headers import CommandHeader

__all__ = [
    "TOPIC_MAX_LENGTH",
    "GROUP_MAX_LENGTH",
    "MAX_QUEUE_NUMS",
    "PERM_MASK",
    "FieldCheck",
    "RequestCheck",
    "guard",
    "is_blank",
    "is_topic_or_group_illegal",
    "validate_topic",
    "validate_group",
    "text_problem",
    "validate_topic_config",
    "check_topic",
    "check_stored_topic",
    "check_group",
    "check_queue_nums",
    "check_queue_id",
    "check_perm",
    "check_non_negative_int32",
]

TOPIC_MAX_LENGTH = 127  # TopicValidator.TOPIC_MAX_LENGTH
GROUP_MAX_LENGTH = 255  # Validators.CHARACTER_MAX_LENGTH
# Not upstream (4.9.7 takes any int): the largest queue count a topic config may carry,
# here and in the nameserver's route table.
MAX_QUEUE_NUMS = 65535
PERM_MASK = int(Perm.PRIORITY | Perm.READ | Perm.WRITE | Perm.INHERIT)
_INT32_MAX = 2**31 - 1

_VALID_CHARS = frozenset("%|-_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_PATTERN = "^[%|a-zA-Z0-9_-]+$"
# Character.isWhitespace: Unicode space separators except the no-break ones, plus these.
_JAVA_WHITESPACE_ASCII = frozenset("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f ")
_NO_BREAK = frozenset("\u00a0\u2007\u202f")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _java_whitespace(c: str) -> bool:
    if c in _JAVA_WHITESPACE_ASCII:
        return True
    return c not in _NO_BREAK and unicodedata.category(c) in ("Zs", "Zl", "Zp")


def is_blank(s: str | None) -> bool:
    """``UtilAll.isBlank``: ``None``, empty, or Java whitespace only."""
    if s is None:
        return True
    if s.isalnum():  # the usual name: not one whitespace character, decided in C
        return False
    return all(_java_whitespace(c) for c in s)


def is_topic_or_group_illegal(s: str) -> bool:
    """``TopicValidator.isTopicOrGroupIllegal``: a character outside ``^[%|a-zA-Z0-9_-]+$``."""
    return not _VALID_CHARS.issuperset(s)


def validate_topic(topic: str | None) -> str | None:
    """``TopicValidator.validateTopic``: ``None`` when valid, else its remark (SYSTEM_ERROR)."""
    if topic and len(topic) <= TOPIC_MAX_LENGTH and _VALID_CHARS.issuperset(topic):
        return None  # every send checks its topic: legal characters are never blank
    if topic is None or is_blank(topic):
        return "The specified topic is blank."
    if is_topic_or_group_illegal(topic):
        return f"The specified topic contains illegal characters, allowing only {_PATTERN}"
    if len(topic) > TOPIC_MAX_LENGTH:
        return "The specified topic is longer than topic max length."
    return None


def validate_group(group: str | None) -> str | None:
    """``Validators.checkGroup``: ``None`` when valid, else the client's message."""
    if group and len(group) <= GROUP_MAX_LENGTH and _VALID_CHARS.issuperset(group):
        return None  # every pull checks its group: legal characters are never blank
    if group is None or is_blank(group):
        return "the specified group is blank"
    if len(group) > GROUP_MAX_LENGTH:
        return f"the specified group is longer than group max length {GROUP_MAX_LENGTH}."
    if is_topic_or_group_illegal(group):
        return f"the specified group[{group}] contains illegal characters, allowing only {_PATTERN}"
    return None


def validate_topic_config(tc: TopicConfig, key: str | None = None) -> None:
    """Raise ``ProtocolError`` if ``tc`` could not become a route's queue data.

    Queue counts 0..``MAX_QUEUE_NUMS``, perm 0..15, a non-negative ``topicSysFlag`` and a
    name: what the nameserver registers and what the broker loads from ``topics.json``.
    """
    name = tc.topic_name
    where = f"topic config {name or key!r}"
    if not isinstance(name, str) or not name:
        raise ProtocolError(f"topic config under key {key!r} has no topicName")
    for attr, wire in (("read_queue_nums", "readQueueNums"), ("write_queue_nums", "writeQueueNums")):
        n = getattr(tc, attr)
        if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= MAX_QUEUE_NUMS:
            raise ProtocolError(f"{where}: {wire}={n!r} is outside 0..{MAX_QUEUE_NUMS}")
    perm = tc.perm
    if not isinstance(perm, int) or isinstance(perm, bool) or not 0 <= perm <= PERM_MASK:
        raise ProtocolError(f"{where}: perm={perm!r} is outside 0..{PERM_MASK}")
    flag = tc.topic_sys_flag
    if not isinstance(flag, int) or isinstance(flag, bool) or not 0 <= flag <= _INT32_MAX:
        raise ProtocolError(f"{where}: topicSysFlag={flag!r} is not a non-negative int")


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be written as UTF-8 (a lone surrogate), or ``None``."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"holds a lone UTF-16 surrogate at index {exc.start}, which is not Unicode text"
    return None


# -- field checks: (wire key, raw text) -> remark or None --------------------------------

FieldCheck = Callable[[str, str], "str | None"]


def _int(raw: str) -> int | None:
    """The value as the header decoder would read it; ``None`` leaves the remark to it."""
    text = raw.strip()
    if not text or not text.lstrip("+-").isascii() or not text.lstrip("+-").isdigit():
        return None
    return int(text)


def check_topic(key: str, raw: str) -> str | None:
    """TopicValidator, remark verbatim (the stock broker's SYSTEM_ERROR answer)."""
    return validate_topic(raw)


def check_stored_topic(key: str, raw: str) -> str | None:
    """A topic name about to be stored: TopicValidator, or the group rule for retry/DLQ topics."""
    for prefix in (MixAll.RETRY_GROUP_TOPIC_PREFIX, MixAll.DLQ_GROUP_TOPIC_PREFIX):
        if raw.startswith(prefix) and len(raw) > TOPIC_MAX_LENGTH:
            remark = validate_group(raw[len(prefix):])
            return None if remark is None else f"{key}: {remark}"
    remark = validate_topic(raw)
    return None if remark is None else f"{key}: {remark}"


def check_group(key: str, raw: str) -> str | None:
    remark = validate_group(raw)
    return None if remark is None else f"{key}: {remark}"


def check_queue_nums(key: str, raw: str) -> str | None:
    n = _int(raw)
    if n is not None and not 0 <= n <= MAX_QUEUE_NUMS:
        return f"{key}={n} is outside 0..{MAX_QUEUE_NUMS}"
    return None


def check_queue_id(key: str, raw: str) -> str | None:
    n = _int(raw)
    if n is not None and not 0 <= n < MAX_QUEUE_NUMS:
        return f"{key}={n} is outside 0..{MAX_QUEUE_NUMS - 1}"
    return None


def check_perm(key: str, raw: str) -> str | None:
    n = _int(raw)
    if n is not None and (n < 0 or n & ~PERM_MASK):
        return (f"{key}={n} is not a combination of PRIORITY(8), READ(4), WRITE(2) and "
                f"INHERIT(1)")
    return None


def check_non_negative_int32(key: str, raw: str) -> str | None:
    n = _int(raw)
    if n is not None and not 0 <= n <= _INT32_MAX:
        return f"{key}={n} is negative"
    return None


# -- the request check -------------------------------------------------------------------


def _json_body_problem(body: bytes) -> str | None:
    if not _SURROGATE_ESCAPE.search(body):
        return None  # no \uD800-\uDFFF escape at all: the common case costs one scan
    try:
        doc = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None  # not standard JSON: the processor's own decoder answers
    try:
        json.dumps(doc, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return "body holds a lone UTF-16 surrogate, which is not Unicode text"
    except (TypeError, ValueError, RecursionError):
        return None
    return None


class RequestCheck:
    """The edge checks of one request code (see the module docstring): its header fields'
    ``rules`` and, with ``json_body``, the JSON body's text. Built once per code when its
    handler is registered (``protocol.request_specs``), so a request pays no lookup."""

    __slots__ = ("rules", "json_body")

    def __init__(self, rules: Mapping[str, FieldCheck] | None = None,
                 json_body: bool = False) -> None:
        self.rules = dict(rules or {})
        self.json_body = json_body

    def check(self, request: RemotingCommand) -> str | None:
        """``None`` if ``request`` may proceed, else the remark of its refusal."""
        ext = request.ext_fields
        if ext:
            if not _all_text(ext):
                remark = self._text_remark(ext)
                if remark is not None:
                    return remark
            fields = self.rules
            if fields:
                for key, check in fields.items():
                    raw = ext.get(key)
                    if isinstance(raw, str):
                        remark = check(key, raw)
                        if remark is not None:
                            return remark
        if self.json_body and request.body:
            return _json_body_problem(bytes(request.body))
        return None

    @staticmethod
    def _text_remark(ext: Mapping[str, Any]) -> str | None:
        """The remark for the first header key or value that is not UTF-8 text."""
        for key, value in ext.items():
            problem = text_problem(key)
            if problem is not None:
                return f"a header field name {problem}"
            if isinstance(value, str):
                problem = text_problem(value)
                if problem is not None:
                    return f"header field {key} {problem}"
        return None


def _all_text_py(ext: Mapping[str, Any]) -> bool:
    """Every key and string value encodes as UTF-8: two joins and two encodes in C instead
    of one ``text_problem`` call per key and value (a send header has ~15 of each). False
    leaves the remark (or none) to ``RequestCheck._text_remark``. ``_command.all_text`` is
    its compiled twin (one pass, no copies), used when built."""
    try:
        "".join(ext).encode("utf-8")
        "".join(ext.values()).encode("utf-8")
    except (TypeError, UnicodeEncodeError):
        return False  # a lone surrogate, or a non-string value: the per-field walk decides
    return True


_all_text: Callable[[Mapping[str, Any]], bool] = _all_text_py
try:
    refuse_extension("aiorocketmq.protocol._command")
    from ._command import all_text as _c_all_text
except ImportError:  # no C compiler, or AIOROCKETMQ_NO_EXTENSIONS: _all_text_py runs
    pass
else:
    _all_text = _c_all_text


Refused = Callable[[Any, RemotingCommand, str], None]
_Handler = Callable[[Any, RemotingCommand], "RemotingCommand | None | Awaitable[RemotingCommand | None]"]


def guard(handler: _Handler, check: RequestCheck, on_refused: Refused | None = None,
          header: type[CommandHeader] | None = None) -> _Handler:
    """``handler`` behind ``check``: a refused request is answered SYSTEM_ERROR + remark.

    With ``header`` (the spec's header class, where the edge decodes it), an accepted
    request's header is decoded here, once, into ``request.header`` for the handler
    (``headers.decode_header`` returns it). A ``HeaderError`` (a required field missing, a
    number that does not parse) propagates: the channel answers it SYSTEM_ERROR with its
    message, as it answers one raised by a handler."""
    if header is None:

        def guarded(channel: Any, request: RemotingCommand
                    ) -> RemotingCommand | None | Awaitable[RemotingCommand | None]:
            remark = check.check(request)
            if remark is None:
                return handler(channel, request)
            if on_refused is not None:
                on_refused(channel, request, remark)
            return request.create_response(ResponseCode.SYSTEM_ERROR, remark)
    else:
        decode = header.from_ext_fields  # bound once, here

        def guarded(channel: Any, request: RemotingCommand
                    ) -> RemotingCommand | None | Awaitable[RemotingCommand | None]:
            remark = check.check(request)
            if remark is None:
                request.header = decode(request.ext_fields)
                return handler(channel, request)
            if on_refused is not None:
                on_refused(channel, request, remark)
            return request.create_response(ResponseCode.SYSTEM_ERROR, remark)

    guarded.__name__ = getattr(handler, "__name__", "guarded")
    guarded.__qualname__ = getattr(handler, "__qualname__", "guarded")
    guarded.__wrapped__ = handler  # type: ignore[attr-defined]  # inspect.unwrap finds it
    return guarded
