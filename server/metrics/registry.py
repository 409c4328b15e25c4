"""A small dependency-free metrics registry and the Prometheus text exposition format 0.0.4.

Contract:

* Three kinds of live metric, each a family of children keyed by label values:
  ``Counter`` (``inc``), ``Gauge`` (``set`` / ``inc`` / ``dec``) and ``Histogram``
  (``observe`` into fixed buckets). ``family.labels(*values)`` returns the child; callers
  on hot paths look a child up once and keep it (``child.value += n`` is the whole cost
  of a count afterwards).
* Label sets are bounded: a family holds at most ``max_series`` children; once full, a
  new combination of values gets the shared child whose every label value is ``other``.
  A client sending random topic names or request codes cannot grow memory or the scrape.
* Scrape-time families (``counter_func`` / ``gauge_func``) call a function at each
  ``render()`` that yields ``(label_values, value)`` pairs; the first ``max_series``
  combinations in the function's order keep their own series and the rest are summed
  into ``other`` (so a stable order keeps each series stable).
* ``render()`` writes the text format 0.0.4 (https://prometheus.io/docs/instrumenting/
  exposition_formats/): ``# HELP`` (``\\`` and newline escaped), ``# TYPE``, one line per
  sample, label values with ``\\``, ``"`` and newline escaped; histograms as cumulative
  ``_bucket{le="..."}`` lines ending in ``le="+Inf"``, then ``_sum`` and ``_count``.

Everything runs on one event loop; nothing here locks.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Literal, TypeAlias

__all__ = [
    "Registry",
    "Counter",
    "Gauge",
    "Histogram",
    "CounterChild",
    "GaugeChild",
    "HistogramChild",
    "OTHER",
    "DEFAULT_MAX_SERIES",
    "LATENCY_BUCKETS",
    "CONTENT_TYPE",
    "format_value",
]

OTHER = "other"
DEFAULT_MAX_SERIES = 1000
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Seconds, from 50 us (an in-memory append) to 10 s (a stuck fsync or a very slow request).
LATENCY_BUCKETS = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                   0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")

Kind: TypeAlias = Literal["counter", "gauge", "histogram"]
LabelValues: TypeAlias = tuple[str, ...]
Sample: TypeAlias = tuple[LabelValues, float]
SampleFunc: TypeAlias = Callable[[], Iterable[Sample]]


def format_value(value: float) -> str:
    """A sample value as Prometheus writes it (Go's float formatting for the specials)."""
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def _le(bound: float) -> str:
    return "+Inf" if math.isinf(bound) else repr(float(bound))


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _label_text(names: Sequence[str], values: Sequence[str], extra: str = "") -> str:
    parts = [f'{n}="{_escape_label(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


# -- children --------------------------------------------------------------------------------


class CounterChild:
    """One counter series; ``value`` only grows."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value: float = 0

    def inc(self, amount: float = 1) -> None:
        if amount < 0:
            raise ValueError(f"a counter cannot decrease (inc by {amount})")
        self.value += amount


class GaugeChild:
    """One gauge series."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value: float = 0

    def set(self, value: float) -> None:
        self.value = value

    def inc(self, amount: float = 1) -> None:
        self.value += amount

    def dec(self, amount: float = 1) -> None:
        self.value -= amount


class HistogramChild:
    """One histogram series: per-bucket counts (not cumulative until rendered), sum, count."""

    __slots__ = ("bounds", "counts", "sum", "count")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds  # sorted upper bounds, +Inf last
        self.counts = [0] * len(bounds)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        # bisect_left: a value equal to a bound belongs to that bucket (le = "less or equal").
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1

    def cumulative(self) -> list[int]:
        out = []
        total = 0
        for c in self.counts:
            total += c
            out.append(total)
        return out


# -- families --------------------------------------------------------------------------------


class _Family:
    kind: Kind

    def __init__(self, name: str, help: str, label_names: Sequence[str], max_series: int) -> None:
        self.name = name
        self.help = help
        self.label_names = tuple(label_names)
        self.max_series = max_series
        self._children: dict[LabelValues, object] = {}
        self._other_key: LabelValues = (OTHER,) * len(self.label_names)

    def _new_child(self) -> object:
        raise NotImplementedError

    def _child(self, values: LabelValues) -> object:
        child = self._children.get(values)
        if child is not None:
            return child
        if len(values) != len(self.label_names):
            raise ValueError(f"{self.name} takes labels {self.label_names}, got {values!r}")
        if len(self._children) >= self.max_series:
            values = self._other_key
            child = self._children.get(values)
            if child is not None:
                return child
        child = self._children[values] = self._new_child()
        return child

    @property
    def series_count(self) -> int:
        return len(self._children)

    def _render(self, out: list[str]) -> None:
        raise NotImplementedError


def _render_values(family: _Family, out: list[str]) -> None:
    for values, child in family._children.items():
        out.append(f"{family.name}{_label_text(family.label_names, values)} "
                   f"{format_value(child.value)}\n")  # type: ignore[attr-defined]


class Counter(_Family):
    """A counter family; ``labels(...)`` gives a ``CounterChild``, ``inc`` counts unlabelled."""

    kind: Kind = "counter"

    def _new_child(self) -> CounterChild:
        return CounterChild()

    def labels(self, *values: str) -> CounterChild:
        return self._child(values)  # type: ignore[return-value]

    def inc(self, amount: float = 1) -> None:
        self.labels().inc(amount)

    def _render(self, out: list[str]) -> None:
        _render_values(self, out)


class Gauge(_Family):
    """A gauge family; ``labels(...)`` gives a ``GaugeChild``; ``set`` sets the unlabelled one."""

    kind: Kind = "gauge"

    def _new_child(self) -> GaugeChild:
        return GaugeChild()

    def labels(self, *values: str) -> GaugeChild:
        return self._child(values)  # type: ignore[return-value]

    def set(self, value: float) -> None:
        self.labels().set(value)

    def _render(self, out: list[str]) -> None:
        _render_values(self, out)


class Histogram(_Family):
    """A histogram family with fixed bucket upper bounds (``+Inf`` is added)."""

    kind: Kind = "histogram"

    def __init__(self, name: str, help: str, label_names: Sequence[str], max_series: int,
                 buckets: Sequence[float]) -> None:
        if "le" in label_names:
            raise ValueError("a histogram cannot have a label named 'le'")
        bounds = sorted(float(b) for b in buckets)
        if not bounds or len(set(bounds)) != len(bounds) or any(math.isnan(b) for b in bounds):
            raise ValueError(f"histogram {name} needs distinct, non-NaN buckets, got {buckets!r}")
        if not math.isinf(bounds[-1]):
            bounds.append(math.inf)
        super().__init__(name, help, label_names, max_series)
        self.bounds = tuple(bounds)

    def _new_child(self) -> HistogramChild:
        return HistogramChild(self.bounds)

    def labels(self, *values: str) -> HistogramChild:
        return self._child(values)  # type: ignore[return-value]

    def observe(self, value: float) -> None:
        self.labels().observe(value)

    def _render(self, out: list[str]) -> None:
        names = self.label_names
        name = self.name
        for values, c in self._children.items():
            child: HistogramChild = c  # type: ignore[assignment]
            for bound, total in zip(self.bounds, child.cumulative(), strict=True):
                le = 'le="' + _le(bound) + '"'
                out.append(f"{name}_bucket{_label_text(names, values, le)} {total}\n")
            labels = _label_text(names, values)
            out.append(f"{name}_sum{labels} {format_value(child.sum)}\n")
            out.append(f"{name}_count{labels} {child.count}\n")


class _FuncFamily(_Family):
    """Samples computed at scrape time by ``func``; bounded by folding the tail into ``other``."""

    def __init__(self, kind: Kind, name: str, help: str, label_names: Sequence[str],
                 max_series: int, func: SampleFunc) -> None:
        super().__init__(name, help, label_names, max_series)
        self.kind = kind
        self._func = func

    def samples(self) -> list[Sample]:
        kept: dict[LabelValues, float] = {}
        other = 0.0
        folded = False
        width = len(self.label_names)
        for values, value in self._func():
            if len(values) != width:
                raise ValueError(f"{self.name} takes labels {self.label_names}, got {values!r}")
            if values in kept:
                kept[values] += value
            elif len(kept) < self.max_series and values != self._other_key:
                kept[values] = value
            else:
                other += value
                folded = True
        out = list(kept.items())
        if folded:
            out.append((self._other_key, other))
        return out

    def _render(self, out: list[str]) -> None:
        for values, value in self.samples():
            out.append(f"{self.name}{_label_text(self.label_names, values)} "
                       f"{format_value(value)}\n")


# -- registry --------------------------------------------------------------------------------


class Registry:
    """Named metric families, rendered together in registration order."""

    def __init__(self, *, max_series: int = DEFAULT_MAX_SERIES) -> None:
        self.max_series = max_series
        self._families: dict[str, _Family] = {}
        self._collect_hooks: list[Callable[[], None]] = []

    def _add(self, family: _Family) -> None:
        if not _METRIC_NAME.match(family.name):
            raise ValueError(f"invalid metric name {family.name!r}")
        for label in family.label_names:
            if not _LABEL_NAME.match(label) or label.startswith("__"):
                raise ValueError(f"invalid label name {label!r} on {family.name}")
        if len(set(family.label_names)) != len(family.label_names):
            raise ValueError(f"duplicate label names on {family.name}")
        if family.max_series < 1:
            raise ValueError("max_series must be at least 1")
        if family.name in self._families:
            raise ValueError(f"metric {family.name} is already registered")
        self._families[family.name] = family

    def _bound(self, max_series: int | None) -> int:
        return self.max_series if max_series is None else max_series

    def counter(self, name: str, help: str, labels: Sequence[str] = (), *,
                max_series: int | None = None) -> Counter:
        family = Counter(name, help, labels, self._bound(max_series))
        self._add(family)
        return family

    def gauge(self, name: str, help: str, labels: Sequence[str] = (), *,
              max_series: int | None = None) -> Gauge:
        family = Gauge(name, help, labels, self._bound(max_series))
        self._add(family)
        return family

    def histogram(self, name: str, help: str, labels: Sequence[str] = (), *,
                  buckets: Sequence[float] = LATENCY_BUCKETS,
                  max_series: int | None = None) -> Histogram:
        family = Histogram(name, help, labels, self._bound(max_series), buckets)
        self._add(family)
        return family

    def counter_func(self, name: str, help: str, labels: Sequence[str], func: SampleFunc, *,
                     max_series: int | None = None) -> None:
        """A counter whose series ``func`` yields at each scrape (e.g. read from other stats)."""
        self._add(_FuncFamily("counter", name, help, labels, self._bound(max_series), func))

    def gauge_func(self, name: str, help: str, labels: Sequence[str], func: SampleFunc, *,
                   max_series: int | None = None) -> None:
        """A gauge whose series ``func`` yields at each scrape."""
        self._add(_FuncFamily("gauge", name, help, labels, self._bound(max_series), func))

    def add_collect_hook(self, hook: Callable[[], None]) -> None:
        """Call ``hook`` at the start of every ``render()``, before the families' functions."""
        self._collect_hooks.append(hook)

    def get(self, name: str) -> _Family | None:
        return self._families.get(name)

    def render(self) -> str:
        """Every family in the text exposition format 0.0.4."""
        for hook in self._collect_hooks:
            hook()
        out: list[str] = []
        for family in self._families.values():
            out.append(f"# HELP {family.name} {_escape_help(family.help)}\n")
            out.append(f"# TYPE {family.name} {family.kind}\n")
            family._render(out)
        return "".join(out)
