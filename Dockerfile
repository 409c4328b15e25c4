# aiorocketmq images. Targets:
#   server  mqnamesrv / mqbroker / mqadmin (python:3.11 on Debian 12 "bookworm" + the package)
#   spark   the server image plus Java 17 (headless) and pyspark, for examples/spark_pipeline.py
#
# The Debian release is pinned: python:3.11-slim follows Debian's stable release, and
# Debian 13 "trixie" has no openjdk-17-jre-headless, so an unpinned base stops building
# the spark image the day the tag moves (tests/unit/test_compose_file.py checks the
# packages installed below against the pinned release).
FROM python:3.11-slim-bookworm AS server
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /opt/aiorocketmq
COPY pyproject.toml README.md ./
COPY protocol ./protocol
COPY server ./server
COPY client ./client
COPY spark_sink ./spark_sink
COPY bench ./bench
COPY aiorocketmq ./aiorocketmq
COPY examples ./examples
RUN pip install .
# The mount points of docker-compose.yml's volumes exist in the image, owned by the user
# the processes run as: a named volume starts as a copy of them (an absent mount point
# would be created root-owned, and uid 10001 could not write the store, the nameserver's
# ~/namesrv/kvConfig.json or the Spark checkpoint).
RUN useradd --create-home --uid 10001 rocketmq \
    && mkdir -p /home/rocketmq/store /home/rocketmq/namesrv /home/rocketmq/checkpoint \
    && chown -R rocketmq /home/rocketmq
USER rocketmq
EXPOSE 9876 10911
CMD ["mqnamesrv", "--host", "0.0.0.0", "--port", "9876"]

FROM server AS spark
USER root
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/* \
    && ln -s "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" /usr/lib/jvm/java-17
RUN pip install ".[spark]"
# /usr/lib/jvm/java-17 points at java-17-openjdk-<arch> of whatever architecture was built.
ENV JAVA_HOME=/usr/lib/jvm/java-17 PYSPARK_PYTHON=/usr/local/bin/python
USER rocketmq
CMD ["python", "-m", "examples.spark_pipeline"]
