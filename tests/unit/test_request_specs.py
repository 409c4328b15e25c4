"""``protocol/request_specs.py``: every spec is complete and the tables read from it agree.

The broker's and nameserver's registrations are held to the specs in
``tests/integration/test_request_specs.py`` (they need a started broker); a client's here.
"""

from __future__ import annotations

import dataclasses
import inspect

from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.instance import MQClientInstance
from aiorocketmq.protocol.bodies import HeartbeatData
from aiorocketmq.protocol.codes import RequestCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.headers import CommandHeader
from aiorocketmq.protocol.request_specs import (
    BATCH,
    BROKER,
    CLIENT,
    MESSAGE,
    NAMESRV,
    PROPERTIES,
    RAW,
    REQUEST_HEADERS,
    REQUEST_SPECS,
    RESPONSE_HEADERS,
    AclResource,
    acl_header_fields,
    broker_specs,
    client_specs,
    edge_check,
    namesrv_specs,
)
from aiorocketmq.server.broker.acl.plain_permission import ADMIN_CODES
from aiorocketmq.server.broker.acl.validator import parse_request

_BODY_WORDS = {MESSAGE, BATCH, PROPERTIES, RAW}


def test_every_spec_is_complete() -> None:
    for code, spec in REQUEST_SPECS.items():
        assert code == spec.code and RequestCode(code) is spec.code
        for module in spec.handled_by:
            assert module.startswith((BROKER, NAMESRV, CLIENT)), (spec.code, module)
        for cls in (spec.header, spec.response_header):
            assert cls is None or (isinstance(cls, type) and issubclass(cls, CommandHeader))
        body = spec.body
        assert body is None or body in _BODY_WORDS or hasattr(body, "decode"), spec.code
        if spec.json_body:  # a client's JSON body (or none: UNREGISTER_CLIENT's is checked too)
            assert body is None or isinstance(body, type), spec.code
        for key, check in spec.rules.items():
            assert isinstance(key, str) and callable(check)
        acl = spec.acl
        if acl is not None:
            assert spec.handled_in(BROKER)
            assert all(isinstance(r, AclResource) for r in acl.resources)
            assert acl.resources or acl.heartbeat_body, spec.code
            if acl.decodes_header:
                assert spec.header is not None
            if acl.heartbeat_body:
                assert spec.body is HeartbeatData
        if spec.admin or spec.may_create_topic or spec.rules:
            assert spec.handled_in(BROKER), spec.code
        assert edge_check(spec) is spec.edge
        assert spec.edge.rules == dict(spec.rules) and spec.edge.json_body == spec.json_body


def test_no_code_is_handled_by_both_servers() -> None:
    assert not set(broker_specs()) & set(namesrv_specs())


def test_client_registers_exactly_its_specs() -> None:
    instance = MQClientInstance(ClientConfig(namesrv_addr="127.0.0.1:9876"), "specs@test")
    registered = {code: inspect.unwrap(h).__module__.removeprefix("aiorocketmq.")
                  for code, h in instance.remoting.processors.items()}
    expected = {code: [m for m in spec.handled_by if m.startswith(CLIENT)]
                for code, spec in client_specs().items()}
    assert registered == {code: modules[0] for code, modules in expected.items()}
    assert all(len(modules) == 1 for modules in expected.values())


def test_header_tables_come_from_the_specs() -> None:
    assert set(REQUEST_HEADERS) == {c for c, s in REQUEST_SPECS.items() if s.header}
    assert set(RESPONSE_HEADERS) == {c for c, s in REQUEST_SPECS.items() if s.response_header}
    for code, spec in REQUEST_SPECS.items():
        assert REQUEST_HEADERS.get(code) is spec.header
        assert RESPONSE_HEADERS.get(code) is spec.response_header


def test_acl_admin_codes_are_upstreams() -> None:
    # Permission.ADMIN_CODE (docs/PROTOCOL.md 13.4)
    assert ADMIN_CODES == {RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.UPDATE_BROKER_CONFIG,
                           RequestCode.DELETE_TOPIC_IN_BROKER,
                           RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                           RequestCode.DELETE_SUBSCRIPTIONGROUP}


def test_acl_decoded_headers_check_upstreams_fields() -> None:
    # PlainAccessValidator.parse decodes these three headers: their @CFNotNull fields in
    # declaration order, and the numbers among them.
    fields = {code: acl_header_fields(spec) for code, spec in REQUEST_SPECS.items()
              if spec.acl is not None and spec.acl.decodes_header}
    assert fields == {
        RequestCode.UPDATE_CONSUMER_OFFSET: (("consumerGroup", "topic", "queueId", "commitOffset"),
                                             ("queueId", "commitOffset")),
        RequestCode.UNREGISTER_CLIENT: (("clientID",), ()),
        RequestCode.GET_CONSUMER_LIST_BY_GROUP: (("consumerGroup",), ()),
    }


def test_acl_resources_follow_the_specs() -> None:
    def perms(code: int, ext: dict[str, str]) -> dict[str, int] | None:
        res = parse_request(RemotingCommand.create_request(code, ext_fields=ext), "h:1")
        return res.resource_perms

    assert perms(RequestCode.SEND_MESSAGE_V2, {"a": "G", "b": "T"}) == {"T": 4}
    assert perms(RequestCode.SEND_MESSAGE_V2, {"a": "G", "b": "%RETRY%G"}) == {"%RETRY%G": 8}
    assert perms(RequestCode.PULL_MESSAGE, {"topic": "T", "consumerGroup": "G"}) == {
        "T": 8, "%RETRY%G": 8}
    assert perms(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": "0"}) is None


def test_specs_are_frozen() -> None:
    spec = REQUEST_SPECS[RequestCode.SEND_MESSAGE_V2]
    try:
        spec.may_create_topic = False  # type: ignore[misc]
    except dataclasses.FrozenInstanceError:
        return
    raise AssertionError("a RequestSpec could be changed")
