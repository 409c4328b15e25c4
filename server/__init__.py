"""aiorocketmq.server: the nameserver, and the broker with its store."""

if __name__ != "aiorocketmq.server":  # one name per module: docs/ARCHITECTURE.md
    raise ImportError(f"import aiorocketmq.server, not {__name__}: the top-level server/ is "
                      "the aiorocketmq package's part, and a second name would load a second "
                      "copy of each of its modules and classes")
