"""The compiled parts of aiorocketmq; everything else is in pyproject.toml.

All are optional: where no C compiler is found pip goes on without them and the Python
code they speed up runs instead (the tests run both on the same inputs). Two decoders of
stored message records:

* ``aiorocketmq.protocol._message`` (protocol/_message.c): pull bodies into ``MessageExt``
  objects for ``protocol.message.decode_messages`` (tests/unit/test_message_native.py).
* ``aiorocketmq.spark_sink._records`` (spark_sink/_records.c): the Spark source's pull
  bodies into Arrow buffers (``spark_sink/columnar.py``; tests/unit/test_spark_columnar.py).

And the Spark source's pull frames both ways: ``aiorocketmq.spark_sink._pull``
(spark_sink/_pull.c), a PULL_MESSAGE request as bytes and the four offsets of its answer
(``spark_sink/pullwire.py``; tests/unit/test_spark_pullwire.py).

And one walk of the broker's: ``aiorocketmq.server.store._units`` (server/store/_units.c),
the consume-queue units of an unfiltered pull (``message_store.scan_units``;
tests/unit/test_store_scan_units.py), and the store's put path: ``aiorocketmq.server.store._put``
(server/store/_put.c), a stored record written straight into the commit log's mapping and
an index entry into the index file's (``commit_log.py``, ``index.py``;
tests/unit/test_store_put_native.py). It links zlib (its CRC-32, as Python's ``zlib``).

And the remoting header: ``aiorocketmq.protocol._command`` (protocol/_command.c), the
ROCKETMQ header of a ``RemotingCommand`` both ways (``protocol/command.py``;
tests/unit/test_command_native.py).
"""

from setuptools import Extension, setup

# protocol/_stored_record.h: the record checks and byte readers all three share.
_COMMON = {"include_dirs": ["protocol"], "depends": ["protocol/_stored_record.h"],
           "extra_compile_args": ["-O2"], "optional": True}

setup(ext_modules=[
    Extension("aiorocketmq.protocol._message", ["protocol/_message.c"], **_COMMON),
    Extension("aiorocketmq.spark_sink._records", ["spark_sink/_records.c"], **_COMMON),
    Extension("aiorocketmq.spark_sink._pull", ["spark_sink/_pull.c"], **_COMMON),
    Extension("aiorocketmq.server.store._units", ["server/store/_units.c"], **_COMMON),
    Extension("aiorocketmq.protocol._command", ["protocol/_command.c"], **_COMMON),
    Extension("aiorocketmq.server.store._put", ["server/store/_put.c"], libraries=["z"],
              **_COMMON),
])
