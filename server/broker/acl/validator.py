"""What a request needs, and the broker's check of it, as upstream ``PlainAccessValidator``.

Contract (acl/plain/PlainAccessValidator.java ``parse``, BrokerController ``initialAcl``):

* ``parse(request, remote_addr)`` -> ``PlainAccessResource``: the peer's IP (address
  without port), the request code, ``AccessKey`` / ``Signature`` / ``SecurityToken``, the
  signed content (extField values sorted by key, minus ``Signature`` and
  ``_UNIQUE_KEY_QUERY``, then the body), and the resources the code needs:

  ====================================  ==========================================
  SEND_MESSAGE (``topic``)              topic PUB; a ``%RETRY%`` topic: %RETRY%+``group`` SUB
  SEND_MESSAGE_V2 (``b``)               same, the group from ``a``
  CONSUMER_SEND_MSG_BACK                %RETRY%+``group`` SUB
  PULL_MESSAGE                          ``topic`` SUB, %RETRY%+``consumerGroup`` SUB
  QUERY_MESSAGE                         ``topic`` SUB
  HEART_BEAT (body)                     each consumer group's retry topic and subscribed topic SUB
  UNREGISTER_CLIENT                     %RETRY%+``consumerGroup`` SUB (``clientID`` required)
  GET_CONSUMER_LIST_BY_GROUP            %RETRY%+``consumerGroup`` SUB (required)
  UPDATE_CONSUMER_OFFSET                %RETRY%+``consumerGroup`` SUB, ``topic`` SUB (required fields)
  ====================================  ==========================================

  Those are the ``acl`` entries of the request specs (``protocol/request_specs.py``).
  Every other code needs no resource (only a valid signature), except the admin-only codes
  (specs with ``admin``: plain_permission.ADMIN_CODES). A request without extFields carries no access key.
  A header or body that does not decode is refused with ``AclError`` at ``parse``.
* ``AccessValidator.before_request`` is the server hook (``RemotingServer(request_hook=...)``):
  a refusal is answered ``SYSTEM_ERROR`` with ``AclError.remark``, the stock broker's text;
  nothing reaches a processor, so nothing is stored or changed.
"""

from __future__ import annotations

import os
import re
from typing import Any, NamedTuple

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.acl import (
    ACCESS_KEY,
    BROKER_EXCLUDED_FIELDS,
    SECURITY_TOKEN,
    SIGNATURE,
    Permission,
    combine_request_content,
)
from aiorocketmq.protocol.bodies import HeartbeatData
from aiorocketmq.protocol.channel import Channel
from aiorocketmq.protocol.codes import ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.request_specs import (
    AclSpec,
    RequestSpec,
    acl_header_fields,
    broker_specs,
)

from .errors import AclError, Where
from .plain_permission import RETRY_PREFIX, PlainAccessResource, PlainPermissionManager, retry_topic

__all__ = ["PlainAccessValidator", "parse_request", "rocketmq_home"]

log = get_logger("aiorocketmq.broker.acl")

SUB = Permission.SUB
_JAVA_INT = re.compile(r"[+-]?[0-9]+")


def rocketmq_home(system_properties: dict[str, str] | None = None) -> str | None:
    """``rocketmq.home.dir`` (a ``-D`` property), else the ``ROCKETMQ_HOME`` environment."""
    props = system_properties or {}
    return props.get("rocketmq.home.dir") or os.environ.get("ROCKETMQ_HOME")


def _required(ext: dict[str, str], names: tuple[str, ...]) -> None:
    # RemotingCommand.decodeCommandCustomHeader on the @CFNotNull fields, in declaration order
    for name in names:
        if ext.get(name) is None:
            raise AclError(f"the custom field <{name}> is null", Where.PARSE)


def _java_number(ext: dict[str, str], name: str) -> None:
    # Integer.parseInt / Long.parseLong: an optional sign and ASCII digits, nothing else
    value = ext[name]
    if _JAVA_INT.fullmatch(value) is None:
        raise AclError(f'For input string: "{value}"', Where.PARSE)


def _heart_beat(res: PlainAccessResource, request: RemotingCommand) -> None:
    if request.body is None:
        raise AclError(None, Where.PARSE)  # upstream: NullPointerException in decode
    try:
        data = HeartbeatData.decode(bytes(request.body))
    except Exception as exc:  # any decoding failure refuses the request, as upstream
        raise AclError(str(exc) or None, Where.PARSE) from exc
    for consumer in data.consumer_data_set:
        res.add_resource_and_perm(retry_topic(consumer.group_name), SUB)
        for sub in consumer.subscription_data_set:
            res.add_resource_and_perm(sub.topic, SUB)


class _AclRule(NamedTuple):
    """A code's ``AclSpec`` with its header's required fields and numbers worked out."""

    spec: AclSpec
    required: tuple[str, ...]
    numbers: tuple[str, ...]


def _rule(spec: RequestSpec, acl: AclSpec) -> _AclRule:
    required, numbers = acl_header_fields(spec) if acl.decodes_header else ((), ())
    return _AclRule(acl, required, numbers)


# Request code -> what its ACL check asks (the broker's request specs).
_RULES: dict[int, _AclRule] = {code: _rule(spec, spec.acl)
                               for code, spec in broker_specs().items() if spec.acl is not None}


def _fill(res: PlainAccessResource, request: RemotingCommand, ext: dict[str, str]) -> None:
    rule = _RULES.get(request.code)
    if rule is None:
        return
    if rule.required:
        _required(ext, rule.required)
        for key in rule.numbers:
            _java_number(ext, key)
    acl = rule.spec
    if acl.heartbeat_body:
        _heart_beat(res, request)
    for r in acl.resources:
        name = ext.get(r.key)
        if r.retry_group is not None and name is not None and name.startswith(RETRY_PREFIX):
            res.add_resource_and_perm(retry_topic(ext.get(r.retry_group)), SUB)
        elif r.retry:
            res.add_resource_and_perm(retry_topic(name), r.perm)
        else:
            res.add_resource_and_perm(name, r.perm)


def parse_request(request: RemotingCommand, remote_addr: str | None) -> PlainAccessResource:
    """``PlainAccessValidator.parse`` (module docstring). Raises ``AclError``."""
    res = PlainAccessResource()
    if remote_addr is not None and ":" in remote_addr:
        res.white_remote_address = remote_addr[:remote_addr.rindex(":")]
    else:
        res.white_remote_address = remote_addr
    res.request_code = request.code
    ext: Any = request.ext_fields
    if ext is None:
        return res
    res.access_key = ext.get(ACCESS_KEY)
    res.signature = ext.get(SIGNATURE)
    res.secret_token = ext.get(SECURITY_TOKEN)
    _fill(res, request, ext)
    res.content = combine_request_content(ext, request.body, BROKER_EXCLUDED_FIELDS)
    return res


class PlainAccessValidator:
    """The broker's ACL: one ``PlainPermissionManager`` and the request hook."""

    def __init__(self, manager: PlainPermissionManager) -> None:
        self.manager = manager

    def validate(self, request: RemotingCommand, remote_addr: str | None) -> None:
        """Raise ``AclError`` unless ``request`` from ``remote_addr`` may pass."""
        self.manager.validate(parse_request(request, remote_addr))

    def before_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """Server hook: None lets the request through, a response refuses it."""
        try:
            self.validate(request, channel.remote_addr)
        except AclError as exc:
            log.warning("acl.refused", peer=channel.remote_addr, code=request.code,
                        opaque=request.opaque, reason=str(exc))
            return request.create_response(ResponseCode.SYSTEM_ERROR, exc.remark)
        return None
