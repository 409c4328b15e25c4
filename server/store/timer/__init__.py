"""Timer messages: a delivery at any time, as RocketMQ 5.x's timing wheel does it.

A message with ``TIMER_DELAY_SEC``, ``TIMER_DELAY_MS`` or ``TIMER_DELIVER_MS`` is parked on
the system topic ``rmq_sys_wheel_timer`` (1 queue) with ``TIMER_OUT_MS``, ``REAL_TOPIC`` and
``REAL_QID`` added, and put back into its real topic and queue when due: never before its
delivery time, at most ``timerPrecisionMs`` after it. Pending timers live on disk (the
wheel and the log are mapped files; memory stays bounded however many are pending), and
a restart, graceful or after SIGKILL, delivers each of them exactly once.

Modules (one structure each; each docstring states its contract):

* ``wheel.py``: ``TimerWheel`` (upstream ``TimerWheel``, ``Slot``), the slot file
  ``timerwheel``; ``floor_deliver_ms`` and ``snap_precision``.
* ``log.py``: ``TimerLog`` (upstream ``TimerLog``), the 52-byte units in ``timerlog/``.
* ``checkpoint.py``: ``TimerCheckpoint`` (upstream ``TimerCheckpoint``), ``config/timercheck``.
* ``metrics.py``: ``TimerMetrics`` (upstream ``TimerMetrics``), pending timers per topic in
  ``config/timermetrics``, served by GET_TIMER_METRICS.
* ``timer_store.py``: ``TimerMessageStore`` (upstream ``TimerMessageStore`` and the timer
  part of ``HookUtils``): accepting, enqueue, dequeue, recovery.
* ``hooks.py``: ``TimerSendHook``, the send path's answer codes.

Wiring (``server/broker/controller.py``): the broker builds one ``TimerMessageStore`` per
store, registers ``check_and_transform`` as a store put hook and ``TimerSendHook`` as a send
hook, and with ``timerWheelEnable`` on a master loads and starts it after the store and
shuts it down before the store. A slave only replicates the commit log (the parked and the
delivered records alike) and runs no timer. In DLedger mode the leader runs it, loaded and
started when it becomes the master and suspended when it stops leading
(``server/broker/dledger_role.py``; ``timer_store.py`` says how nothing is delivered twice).
"""

from __future__ import annotations

from .checkpoint import TimerCheckpoint
from .hooks import TimerSendHook
from .log import TimerLog, TimerUnit
from .metrics import TimerMetrics
from .timer_store import TIMER_TOPIC, TimerMessageStore, refusal
from .wheel import Slot, TimerWheel, floor_deliver_ms, snap_precision

__all__ = ["TimerMessageStore", "TimerWheel", "TimerLog", "TimerUnit", "TimerCheckpoint", "TimerMetrics",
           "TimerSendHook", "Slot", "TIMER_TOPIC", "floor_deliver_ms", "snap_precision", "refusal"]
