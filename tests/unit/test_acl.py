"""ACL 1.0: request signing (protocol/acl.py) and the broker's check (server/broker/acl/).

The signing is held to the 74 signed requests captured from stock 4.9.7 mqadmin; the
refusal remarks to the 4.9.7 throw sites (PlainPermissionManager / PlainAccessValidator).
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
import yaml

from aiorocketmq.protocol.acl import (
    AclClientRPCHook,
    Permission,
    SessionCredentials,
    cal_signature,
    combine_request_content,
)
from aiorocketmq.protocol.bodies import ConsumerData, HeartbeatData, SubscriptionData
from aiorocketmq.protocol.codes import RequestCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.server.broker.acl import AclError, PlainAccessConfig, load_access_validator
from aiorocketmq.server.broker.acl.remote_address import expand_ip, remote_address_strategy
from aiorocketmq.server.broker.acl.validator import parse_request
from tests.vectors import load_frames

PPM = "org.apache.rocketmq.acl.plain.PlainPermissionManager"
EXC = "org.apache.rocketmq.acl.common.AclException"

PLAIN_ACL = """
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    admin: true
"""


def test_signature_matches_every_captured_mqadmin_request() -> None:
    signed = [f for f in load_frames() if "Signature" in (f["header"].get("extFields") or {})]
    assert len(signed) == 74
    for f in signed:
        ext = f["header"]["extFields"]
        body = bytes.fromhex(f["body_hex"])
        assert cal_signature(combine_request_content(ext, body), "12345678") == ext["Signature"]
        request = RemotingCommand.create_request(
            f["code"], ext_fields={k: v for k, v in ext.items()
                                   if k not in ("Signature", "AccessKey")}, body=body or None)
        AclClientRPCHook(SessionCredentials("rocketmq2", "12345678")).do_before_request(
            "127.0.0.1:10911", request)
        assert request.ext_fields == ext, f["id"]


def test_signature_key_order_is_java_string_order() -> None:
    # U+10000 (surrogates D800 DC00) sorts before U+FFFF in UTF-16 code units, after it
    # in code points
    ext = {"\U00010000": "b", "\uffff": "a"}
    assert combine_request_content(ext, None) == b"ba"
    assert combine_request_content({"b": "2", "a": "1"}, b"xy") == b"12xy"


def test_credentials_never_show_the_secret() -> None:
    creds = SessionCredentials("ak1234567", "very-secret", "token-xyz")
    assert "very-secret" not in repr(creds) and "token-xyz" not in repr(creds)
    assert "very-secret" not in repr(AclClientRPCHook(creds))


def test_permission_check() -> None:
    assert Permission.parse("PUB|SUB") == Permission.PUB | Permission.SUB
    assert Permission.parse("nonsense") == Permission.DENY
    assert Permission.parse(None) == Permission.DENY
    assert Permission.check(Permission.PUB, Permission.PUB | Permission.SUB)
    assert not Permission.check(Permission.PUB, Permission.SUB)
    assert not Permission.check(Permission.SUB, Permission.DENY | Permission.SUB)
    assert Permission.check(Permission.ANY, Permission.SUB)


@pytest.mark.parametrize(("pattern", "yes", "no"), [
    ("*", ["1.2.3.4", "::1"], []),
    ("", [], ["1.2.3.4"]),
    ("192.168.0.*", ["192.168.0.1", "192.168.0.255"], ["192.168.1.1", "10.0.0.1"]),
    ("192.168.*.*", ["192.168.7.9"], ["192.169.0.1"]),
    ("192.168.1.10-20", ["192.168.1.10", "192.168.1.20"], ["192.168.1.9", "192.168.1.21"]),
    ("192.168.1-3.*", ["192.168.2.200"], ["192.168.4.1"]),
    ("192.168.1.{1,2,3}", ["192.168.1.2"], ["192.168.1.4"]),
    ("10.0.0.1,10.0.0.2", ["10.0.0.2"], ["10.0.0.3"]),
    ("127.0.0.1", ["127.0.0.1"], ["127.0.0.2"]),
    ("1050::0005:600c:326b", ["1050:0:0:0:0:5:600c:326b"], ["1050::5:600c:326c"]),
    ("1050::*", ["1050::1:2"], ["1051::1"]),
])
def test_remote_address_patterns(pattern: str, yes: list[str], no: list[str]) -> None:
    match = remote_address_strategy(pattern)
    for addr in yes:
        assert match(addr), addr
    for addr in no:
        assert not match(addr), addr


@pytest.mark.parametrize("pattern", ["1.2.3", "300.1.1.1", "1.2.3.4-1", "a.b.c.d", "1.2.3.{4"])
def test_bad_remote_address_patterns(pattern: str) -> None:
    with pytest.raises(AclError):
        remote_address_strategy(pattern)


def test_expand_ip() -> None:
    assert expand_ip("1050::5:600c:326b", 8) == "1050:0000:0000:0000:0005:600C:326B"[:0] + \
        "1050:0000:0000:0000:0000:0005:600C:326B"


# -- the validator ------------------------------------------------------------------------


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    return tmp_path


def _props(home: Path) -> dict[str, str]:
    return {"rocketmq.home.dir": str(home)}


def _signed(code: int, ext: dict[str, str], body: bytes | None = None, *,
            ak: str = "RocketMQ", sk: str = "12345678") -> RemotingCommand:
    request = RemotingCommand.create_request(code, ext_fields=dict(ext), body=body)
    AclClientRPCHook(SessionCredentials(ak, sk)).do_before_request("x", request)
    return request


def _refusal(validator: object, request: RemotingCommand, addr: str = "127.0.0.1:5555") -> str:
    with pytest.raises(AclError) as info:
        validator.validate(request, addr)  # type: ignore[attr-defined]
    return info.value.remark


def test_refusals_carry_the_stock_remarks(home: Path) -> None:
    v = load_access_validator(_props(home))
    send = {"a": "G", "b": "topicC", "c": "TBW102", "d": "4", "e": "0"}
    unsigned = RemotingCommand.create_request(RequestCode.SEND_MESSAGE_V2, ext_fields=dict(send))
    assert _refusal(v, unsigned) == (f"{EXC}: No accessKey is configured, "
                                     f"{PPM}.validate(PlainPermissionManager.java:663)")
    assert _refusal(v, _signed(310, send, ak="nobody12")) == (
        f"{EXC}: No acl config for nobody12, {PPM}.validate(PlainPermissionManager.java:667)")
    assert _refusal(v, _signed(310, send, sk="wrong-secret")) == (
        f"{EXC}: Check signature failed for accessKey=RocketMQ, "
        f"{PPM}.validate(PlainPermissionManager.java:683)")
    # topicC is SUB only (explicit): line 610; topicX falls to defaultTopicPerm DENY: line 605
    assert _refusal(v, _signed(310, send)) == (
        f"{EXC}: No default permission for topic:topicC, "
        f"{PPM}.checkPerm(PlainPermissionManager.java:610)")
    assert _refusal(v, _signed(310, {**send, "b": "topicX"})) == (
        f"{EXC}: No default permission for topic:topicX, "
        f"{PPM}.checkPerm(PlainPermissionManager.java:605)")
    v.validate(_signed(310, {**send, "b": "topicB"}), "127.0.0.1:1")
    create = {"topic": "T", "readQueueNums": "8"}
    assert _refusal(v, _signed(RequestCode.UPDATE_AND_CREATE_TOPIC, create)) == (
        f"{EXC}: Need admin permission for request code=17, but accessKey=RocketMQ is not, "
        f"{PPM}.checkPerm(PlainPermissionManager.java:580)")


def test_pull_and_heartbeat_need_sub(home: Path) -> None:
    v = load_access_validator(_props(home))
    pull = {"consumerGroup": "groupA", "topic": "topicC", "queueId": "0"}
    assert "No default permission for group:groupA" in _refusal(v, _signed(11, pull))
    v.validate(_signed(11, {**pull, "consumerGroup": "groupC"}), "127.0.0.1:1")
    hb = HeartbeatData(client_id="c", consumer_data_set=[ConsumerData(
        group_name="groupB", subscription_data_set=[SubscriptionData(topic="topicA")])])
    assert "No default permission for topic:topicA" in _refusal(
        v, _signed(RequestCode.HEART_BEAT, {}, hb.encode()))
    # a body that does not decode is refused at parse
    remark = _refusal(v, _signed(RequestCode.HEART_BEAT, {}, b"{not json"))
    assert remark.endswith("PlainAccessValidator.parse(PlainAccessValidator.java:134)")
    assert _refusal(v, _signed(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "groupC"})) \
        .startswith(f"{EXC}: the custom field <topic> is null, ")


def test_white_lists_skip_the_signature(home: Path) -> None:
    v = load_access_validator(_props(home))
    unsigned = RemotingCommand.create_request(17, ext_fields={"topic": "T"})
    v.validate(unsigned, "10.10.103.7:1234")  # global white list
    v.validate(_signed(17, {"topic": "T"}, ak="rocketmq2", sk="bad-secret"), "192.168.1.9:5")
    assert "Check signature failed" in _refusal(
        v, _signed(17, {"topic": "T"}, ak="rocketmq2", sk="bad-secret"), "192.168.2.9:5")


def test_without_home_nothing_is_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ROCKETMQ_HOME", raising=False)
    v = load_access_validator({})
    assert "No acl config for RocketMQ" in _refusal(v, _signed(310, {"b": "topicB"}))


def test_reload_on_change_and_acl_dir(home: Path) -> None:
    v = load_access_validator(_props(home))
    manager = v.manager
    send = {"a": "G", "b": "topicC"}
    assert "topic:topicC" in _refusal(v, _signed(310, send))
    path = home / "conf" / "plain_acl.yml"
    data = yaml.safe_load(path.read_text())
    data["accounts"][0]["topicPerms"] = ["topicC=PUB"]
    path.write_text(yaml.safe_dump(data))
    os.utime(path, ns=(1, 1))
    manager.check_files()
    v.validate(_signed(310, send), "127.0.0.1:1")
    # an account removed from its file: the key stays known, upstream's 674 remark
    data["accounts"] = data["accounts"][1:]
    path.write_text(yaml.safe_dump(data))
    os.utime(path, ns=(2, 2))
    manager.check_files()
    assert _refusal(v, _signed(310, send)) == (
        f"{EXC}: No PlainAccessResource for accessKey=RocketMQ, "
        f"{PPM}.validate(PlainPermissionManager.java:674)")
    # a new file under conf/acl: full reload
    (home / "conf" / "acl").mkdir()
    (home / "conf" / "acl" / "team.yml").write_text(textwrap.dedent("""
        accounts:
          - accessKey: teamkey1
            secretKey: teamsecret
            defaultTopicPerm: PUB
    """))
    manager.check_files()
    v.validate(_signed(310, send, ak="teamkey1", sk="teamsecret"), "127.0.0.1:1")
    assert "No acl config for RocketMQ" in _refusal(v, _signed(310, send))
    # a broken file keeps what was loaded
    (home / "conf" / "acl" / "team.yml").write_text("accounts: [ {")
    os.utime(home / "conf" / "acl" / "team.yml", ns=(3, 3))
    manager.check_files()
    v.validate(_signed(310, send, ak="teamkey1", sk="teamsecret"), "127.0.0.1:1")


def test_admin_edits_write_the_file(home: Path) -> None:
    v = load_access_validator(_props(home))
    manager = v.manager
    path = home / "conf" / "plain_acl.yml"
    assert manager.update_access_config(PlainAccessConfig(
        access_key="newuser1", secret_key="newsecret1", default_topic_perm="PUB",
        topic_perms=["topicZ=SUB"]))
    data = yaml.safe_load(path.read_text())
    account = data["accounts"][-1]
    assert account == {"accessKey": "newuser1", "secretKey": "newsecret1", "admin": False,
                       "defaultTopicPerm": "PUB", "topicPerms": ["topicZ=SUB"]}
    assert data["dataVersion"][0]["counter"] == 1
    v.validate(_signed(310, {"b": "topicY"}, ak="newuser1", sk="newsecret1"), "127.0.0.1:1")
    with pytest.raises(AclError, match="cannot be null and length should longer than 6"):
        manager.update_access_config(PlainAccessConfig(access_key="short", secret_key="x"))
    with pytest.raises(AclError, match="Parse resource permission error"):
        manager.update_access_config(PlainAccessConfig(
            access_key="newuser1", secret_key="newsecret1", topic_perms=["t=WRITE"]))
    assert manager.delete_access_config("newuser1")
    assert not manager.delete_access_config("newuser1")
    assert "No acl config for newuser1" in _refusal(
        v, _signed(310, {"b": "topicY"}, ak="newuser1", sk="newsecret1"))
    assert manager.update_global_white_addrs_config(["127.0.0.*"], None)
    assert yaml.safe_load(path.read_text())["globalWhiteRemoteAddresses"] == ["127.0.0.*"]
    assert yaml.safe_load(path.read_text())["dataVersion"][0]["counter"] == 3
    assert not manager.update_global_white_addrs_config(["1.1.1.1"], "/etc/passwd")
    whites, configs = manager.all_acl_config()
    assert whites == ["127.0.0.*"]
    assert [c.access_key for c in configs] == ["RocketMQ", "rocketmq2"]
    assert configs[0].secret_key == "12345678"


def test_parse_lists_resources_per_code() -> None:
    r = parse_request(RemotingCommand.create_request(
        310, ext_fields={"a": "G", "b": "%RETRY%G"}), "1.2.3.4:5")
    assert r.white_remote_address == "1.2.3.4"
    assert r.resource_perms == {"%RETRY%G": Permission.SUB}
    r = parse_request(RemotingCommand.create_request(
        10, ext_fields={"producerGroup": "G", "topic": "T"}), "[::1]:5")
    assert r.resource_perms == {"T": Permission.PUB}
    r = parse_request(RemotingCommand.create_request(320, ext_fields={"b": "T"}), "h:1")
    assert r.resource_perms is None  # SEND_BATCH_MESSAGE: no resource, as upstream
    q = RemotingCommand.create_request(12, ext_fields={"topic": "T", "_UNIQUE_KEY_QUERY": "true"})
    assert parse_request(q, "h:1").content == b"T"
