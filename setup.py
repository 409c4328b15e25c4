"""The one compiled part of aiorocketmq; everything else is in pyproject.toml.

``aiorocketmq.spark_sink._records`` (spark_sink/_records.c) decodes the Spark source's
pull bodies into Arrow buffers. It is optional: where no C compiler is found pip goes on
without it and ``spark_sink/columnar.py`` decodes with numpy; tests/unit/test_spark_columnar.py
runs both on the same records.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("aiorocketmq.spark_sink._records", ["spark_sink/_records.c"],
                             extra_compile_args=["-O2"],
                             optional=True)])
