"""mqdashboard's pure parts: password hashes, sessions, CSRF, body previews, config files."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import msgpack
import pytest

from aiorocketmq.client.admin.subscriptions import issue_lines, subscription_issues
from aiorocketmq.client.dashboard.auth import (
    ROLE_VIEWER,
    SessionStore,
    hash_password,
    is_password_hash,
    verify_password,
)
from aiorocketmq.client.dashboard.config import (
    DashboardConfig,
    DashboardConfigError,
    load_config_file,
)
from aiorocketmq.client.dashboard.service import (
    MAX_PAGE_SIZE,
    MAX_PREVIEW_BYTES,
    InputError,
    TtlCache,
    body_preview,
    first_tps,
    page_of,
    topic_kind,
)


def test_password_hash_round_trip_and_salt() -> None:
    h1, h2 = hash_password("s3cret"), hash_password("s3cret")
    assert h1 != h2 and h1.startswith("scrypt$16384$8$1$")
    assert verify_password("s3cret", h1) and verify_password("s3cret", h2)
    assert not verify_password("s3cret ", h1)
    assert is_password_hash(h1)


@pytest.mark.parametrize("bad", ["", "plain", "scrypt$1$8$1$AAAA$AAAA", "scrypt$16384$8$1$!!$AAAA",
                                 "pbkdf2$16384$8$1$AAAA$AAAA", "scrypt$3$8$1$AAAA$AAAA",
                                 f"scrypt${2**24}$8$1$AAAA$AAAA"])
def test_malformed_hash_matches_nothing(bad: str) -> None:
    assert not is_password_hash(bad)
    assert not verify_password("anything", bad)


def test_sessions_are_bounded_and_csrf_checked() -> None:
    store = SessionStore(max_sessions=2)
    sid1, s1 = store.create("a", "admin")
    sid2, _ = store.create("b", ROLE_VIEWER)
    sid3, _ = store.create("c", "admin")
    assert len(store) == 2 and store.get(sid1) is None  # the oldest went
    assert store.get(sid2) is not None and store.get(sid3) is not None
    assert not store.get(sid2).can_write  # type: ignore[union-attr]
    assert s1.csrf_ok(s1.csrf_token) and not s1.csrf_ok(None) and not s1.csrf_ok("x")
    store.drop(sid2)
    assert store.get(sid2) is None and store.get("") is None


def test_sessions_expire() -> None:
    store = SessionStore(ttl_ms=1)
    sid, session = store.create("a", "admin")
    session.expires_at = 0.0
    assert store.get(sid) is None and len(store) == 0


def test_body_preview_modes() -> None:
    body = json.dumps({"a": 1, "b": "é"}).encode()
    assert body_preview(body, "text")["content"] == body.decode()
    pretty = body_preview(body, "json")
    assert pretty["content"] == '{\n  "a": 1,\n  "b": "é"\n}' and pretty["note"] is None
    hexed = body_preview(b"AB\x00", "hex")["content"]
    assert hexed.startswith("00000000  41 42 00") and hexed.endswith("|AB.|")
    packed = msgpack.packb({"k": [1, 2]})
    assert '"k"' in body_preview(packed, "json", content_type="application/x-msgpack")["content"]
    notjson = body_preview(b"plain words", "json")
    assert notjson["mode"] == "text" and "not JSON" in notjson["note"]
    binary = body_preview(b"\xff\xfe", "text")
    assert "not valid UTF-8" in binary["note"]
    cut = body_preview(b"x" * 100, "text", 10)
    assert cut["content"] == "x" * 10 and cut["truncated"] and cut["size"] == 100


@pytest.mark.parametrize(("mode", "limit"), [("xml", 10), ("text", 0), ("hex", MAX_PREVIEW_BYTES + 1)])
def test_body_preview_refuses_bad_arguments(mode: str, limit: int) -> None:
    with pytest.raises(InputError):
        body_preview(b"x", mode, limit)


def test_topic_kind_and_tps() -> None:
    assert [topic_kind(t) for t in ("%RETRY%g", "%DLQ%g", "TBW102", "rmq_sys_x",
                                    "DefaultCluster_REPLY_TOPIC", "Orders")] == [
        "retry", "dlq", "system", "system", "system", "normal"]
    assert first_tps("12.5 11.0 10.2") == 12.5
    assert first_tps(None) == 0.0 and first_tps("n/a") == 0.0


def test_config_file(tmp_path: Path) -> None:
    path = tmp_path / "dashboard.toml"
    path.write_text(f'''namesrv_addr = "127.0.0.1:9876"
port = 0
[acl]
access_key = "ak"
secret_key = "sk"
[users.alice]
password_hash = "{hash_password('pw')}"
role = "viewer"
''')
    config = DashboardConfig.from_settings(load_config_file(path))
    assert config.login_required and config.users["alice"].role == "viewer"
    assert config.access_key == "ak" and "sk" not in repr(config)


@pytest.mark.parametrize(("text", "message"), [
    ('port = "eighty"', "port must be an integer"),
    ("colour = 1", "unknown setting"),
    ('[users.bob]\npassword_hash = "plain"', "not a scrypt"),
    ('[users.bob]\npassword_hash = "HASH"\nrole = "root"', "role must be one of"),
    ('[acl]\naccess_key = "ak"', "go together"),
    ("port = [", "not valid TOML"),
    ("port = 70000", "not in 0..65535"),
])
def test_config_file_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "dashboard.toml"
    path.write_text('namesrv_addr = "127.0.0.1:9876"\n' + text.replace("HASH", hash_password("x")))
    with pytest.raises(DashboardConfigError, match=message):
        DashboardConfig.from_settings(load_config_file(path))


def test_config_needs_a_nameserver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    with pytest.raises(DashboardConfigError, match="no name server address"):
        DashboardConfig()
    monkeypatch.setenv("NAMESRV_ADDR", "10.0.0.1:9876")
    assert DashboardConfig().namesrv_addr == "10.0.0.1:9876"


def test_broker_row_replication_lag_and_tps() -> None:
    """A slave's replication lag is its master's commitLogMaxOffset minus its own (the two
    GET_BROKER_RUNTIME_INFO answers); TPS is the first (10 s) figure of upstream's text."""
    from aiorocketmq.client.dashboard.service import DashboardService

    master = {"commitLogMaxOffset": "5000", "putTps": "12.5 11.0 10.0",
              "getTransferedTps": "3.0 2.0 1.0", "msgPutTotalTodayNow": "40",
              "msgPutTotalTodayMorning": "10", "commitLogDiskRatio": "0.25",
              "brokerVersionDesc": "V4_9_7"}
    slave = {"commitLogMaxOffset": "4200", "brokerVersionDesc": "V4_9_7"}
    same_name = {0: master, 1: slave}
    m = DashboardService._broker_row(master, same_name, 0)
    s = DashboardService._broker_row(slave, same_name, 1)
    assert m["replication_lag_bytes"] is None and s["replication_lag_bytes"] == 800
    assert (m["put_tps"], m["get_tps"], m["msg_put_today"], m["disk_ratio"]) == (12.5, 3.0, 30, 0.25)
    assert s["put_tps"] == 0.0 and s["disk_ratio"] is None and s["version"] == "V4_9_7"
    alone = DashboardService._broker_row(slave, {1: slave}, 1)  # master gone: unknown, not 0
    assert alone["replication_lag_bytes"] is None


def test_main_refuses_bad_settings_and_hashes_passwords(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    import io

    from aiorocketmq.client.dashboard.main import main

    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    assert main([]) == 2
    assert "no name server address" in capsys.readouterr().err
    assert main(["-n", "127.0.0.1:9876", "--port", "70000"]) == 2
    assert "70000" in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin", io.StringIO("hunter2\n"))
    assert main(["hash-password"]) == 0
    assert verify_password("hunter2", capsys.readouterr().out.strip())


async def test_sampler_series_are_bounded_and_groups_refreshed_periodically() -> None:
    from typing import Any

    from aiorocketmq.client.dashboard.sampler import GROUP_REFRESH_SAMPLES, LiveSampler

    class FakeService:
        group_calls = 0

        async def group_names(self) -> list[str]:
            self.group_calls += 1
            return ["g1"]

        async def sample(self, groups: list[str]) -> dict[str, Any]:
            return {"brokers": {"b": {"put_tps": 1.0, "get_tps": 0.0}}, "lag": {g: 3 for g in groups}}

    fake = FakeService()
    sampler = LiveSampler(fake, interval=60, max_samples=4)  # type: ignore[arg-type]
    for _ in range(3 * GROUP_REFRESH_SAMPLES):
        await sampler.sample_once()
    snap = sampler.snapshot()
    assert len(snap["samples"]) == 4 and snap["samples"][-1]["lag"] == {"g1": 3}
    assert fake.group_calls == 3
    sampler.start()
    await sampler.stop()
    await sampler.stop()  # idempotent


# -- paging, the list cache, subscription checks --------------------------------------------


def test_page_of() -> None:
    rows = list(range(205))
    page, fields = page_of(rows, 3, 100)
    assert page == list(range(200, 205))
    assert fields == {"page": 3, "size": 100, "total": 205, "pages": 3}
    assert page_of(rows, 4, 100)[0] == []  # past the end: empty, not an error
    assert page_of([], 1, 50)[1]["pages"] == 1
    for bad in ((0, 10), (1, 0), (1, MAX_PAGE_SIZE + 1), (True, 10)):
        with pytest.raises(InputError):
            page_of(rows, *bad)


async def test_ttl_cache_reuses_shares_and_clears() -> None:
    calls = 0
    gate = asyncio.Event()

    async def load() -> int:
        nonlocal calls
        calls += 1
        await gate.wait()
        return calls

    cache = TtlCache(60.0)
    first = asyncio.ensure_future(cache.get("k", load))
    second = asyncio.ensure_future(cache.get("k", load))  # joins the load under way
    await asyncio.sleep(0)
    gate.set()
    assert await first == 1 and await second == 1 and calls == 1
    assert await cache.get("k", load) == 1 and calls == 1  # from the cache
    cache.clear()
    assert await cache.get("k", load) == 2

    # A load that began before clear() is not stored: the change must show at once.
    gate.clear()
    pending = asyncio.ensure_future(cache.get("j", load))
    await asyncio.sleep(0)
    cache.clear()
    gate.set()
    assert await pending == 3
    assert await cache.get("j", load) == 4

    async def fail() -> int:
        raise ValueError("cluster said no")

    with pytest.raises(ValueError):
        await cache.get("e", fail)
    assert await cache.get("e", load) == 5  # a failure is not cached

    never = TtlCache(0.0)
    assert await never.get("k", load) == 6 and await never.get("k", load) == 7


def _client(cid: str, *subs: tuple[str, str]) -> dict[str, object]:
    return {"client_id": cid, "error": None, "subscriptions": [
        {"topic": t, "expression": e, "expression_type": "TAG"} for t, e in subs]}


def test_subscription_issues() -> None:
    same = [_client("a", ("T", "x || y")), _client("b", ("T", "x || y"))]
    assert subscription_issues(same) == []
    assert subscription_issues([_client("a", ("T", "x"))]) == []  # one client agrees with itself
    mixed = [_client("a", ("T", "TagA")), _client("b", ("T", "TagB"), ("U", "*")),
             {"client_id": "c", "error": "timeout", "subscriptions": None}]
    assert subscription_issues(mixed) == [
        {"topic": "T", "missing": [], "by_expression": {"TagA": ["a"], "TagB": ["b"]}},
        {"topic": "U", "missing": ["a"], "by_expression": {"*": ["b"]}},
    ]
    sql = [_client("a", ("T", "a > 1")), {"client_id": "b", "error": None, "subscriptions": [
        {"topic": "T", "expression": "a > 1", "expression_type": "SQL92"}]}]
    assert subscription_issues(sql)[0]["by_expression"] == {"SQL92: a > 1": ["b"],
                                                            "a > 1": ["a"]}


def test_issue_lines_name_the_topic_and_the_clients() -> None:
    mixed = [_client("a", ("T", "TagA")), _client("b", ("T", "TagB"), ("U", "*"))]
    lines = issue_lines("G", subscription_issues(mixed))
    assert len(lines) == 2
    assert lines[0].startswith("WARNING: the clients of group G subscribe to T differently: "
                               "'TagA' by a; 'TagB' by b")
    assert "U differently: '*' by b; not subscribed by a" in lines[1]
    assert issue_lines("G", []) == []
