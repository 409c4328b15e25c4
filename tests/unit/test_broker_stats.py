"""BrokerStatsManager: counters, TPS windows and their upstream text forms, under a fake clock."""

from __future__ import annotations

from aiorocketmq.server.broker.stats import GROUP_GET_NUMS, TOPIC_PUT_NUMS, BrokerStatsManager


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def test_put_tps_windows_and_text() -> None:
    clock = Clock(1_000_000)
    s = BrokerStatsManager("C", clock=clock)
    assert s.runtime_info()["putTps"] == "  "  # no window has enough samples yet
    for _ in range(20):  # 3 messages per second for 20 s
        s.on_put("T", 3, 300)
        clock.now += 1000
    info = s.runtime_info()
    ten, minute, ten_min = info["putTps"].split(" ")
    assert float(ten) == 3.0 and minute == "" and ten_min == ""
    assert info["msgPutTotalTodayNow"] == "60"
    assert info["putMessageSizeTotal"] == "6000" and info["putMessageAverageSize"] == "100.0"
    clock.now += 45_000  # 65 s after boot: the 60 s window runs from second 5 (15 sent) to now
    ten, minute, _ = s.runtime_info()["putTps"].split(" ")
    assert ten == "0.0" and float(minute) == 0.75


def test_get_counters_found_and_miss() -> None:
    clock = Clock(5_000)
    s = BrokerStatsManager("C", clock=clock)
    for _ in range(11):
        s.on_get("G", "T", 4, 40, found=True)
        s.on_get("G", "T", 0, 0, found=False)
        clock.now += 1000
    info = s.runtime_info()
    assert float(info["getTransferedTps"].split(" ")[0]) == 4.0
    assert float(info["getFoundTps"].split(" ")[0]) == 1.0
    assert float(info["getMissTps"].split(" ")[0]) == 1.0
    assert info["getTotalTps"].split(" ")[0] == "2.0"
    assert info["msgGetTotalTodayNow"] == "44"


def test_stats_item_minute_view_and_group_tps() -> None:
    clock = Clock(0)
    s = BrokerStatsManager("C", clock=clock)
    for _ in range(7):
        s.on_get("G", "T", 10, 100, found=True)
        clock.now += 10_000
    item = s.get_stats_item(GROUP_GET_NUMS, "T@G")
    assert item is not None
    snap = item.minute(clock.now)
    assert snap.sum == 60 and snap.tps == 1.0 and snap.avgpt == 10.0
    assert s.tps_group_get_nums("G", "T") == 1.0
    assert s.get_stats_item(TOPIC_PUT_NUMS, "T") is None
    s.on_group_deleted("G")
    assert s.get_stats_item(GROUP_GET_NUMS, "T@G") is None


def test_midnight_rolls_morning_totals() -> None:
    clock = Clock(1_000_000)
    s = BrokerStatsManager("C", clock=clock)
    s.on_put("T", 5, 50)
    clock.now = s._next_midnight + 1
    s.on_put("T", 2, 20)
    info = s.runtime_info()
    assert info["msgPutTotalTodayMorning"] == "5" and info["msgPutTotalYesterdayMorning"] == "0"
    assert info["msgPutTotalTodayNow"] == "7"
    clock.now = s._next_midnight + 1
    info = s.runtime_info()
    assert info["msgPutTotalYesterdayMorning"] == "5" and info["msgPutTotalTodayMorning"] == "7"


def test_items_lists_one_named_set_in_insertion_order() -> None:
    s = BrokerStatsManager("C", clock=Clock(1_000))
    s.on_put("B", 1, 10)
    s.on_put("A", 2, 20)
    s.on_get("G", "A", 2, 20, found=True)
    assert [(k, i.value) for k, i in s.items(TOPIC_PUT_NUMS)] == [("B", 1), ("A", 2)]
    assert [k for k, _ in s.items(GROUP_GET_NUMS)] == ["A@G"]
    assert list(s.items("NO_SUCH_STATS")) == []
