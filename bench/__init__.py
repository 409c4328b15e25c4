"""aiorocketmq.bench: the benchmarks behind ``mqbench`` and ``make bench``."""

if __name__ != "aiorocketmq.bench":  # one name per module: docs/ARCHITECTURE.md
    raise ImportError(f"import aiorocketmq.bench, not {__name__}: the top-level bench/ is "
                      "the aiorocketmq package's part, and a second name would load a second "
                      "copy of each of its modules and classes")
