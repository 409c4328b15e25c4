# aiorocketmq images. Targets:
#   server  mqnamesrv / mqbroker (python:3.11-slim + the package)
#   spark   the server image plus Java 17 (headless) and pyspark, for examples/spark_pipeline.py
FROM python:3.11-slim AS server
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
RUN useradd --create-home --uid 10001 rocketmq && mkdir -p /home/rocketmq/store \
    && chown -R rocketmq /home/rocketmq
USER rocketmq
EXPOSE 9876 10911
CMD ["mqnamesrv", "--host", "0.0.0.0", "--port", "9876"]

FROM server AS spark
USER root
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*
RUN pip install ".[spark]"
ENV JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 PYSPARK_PYTHON=/usr/local/bin/python
USER rocketmq
CMD ["python", "-m", "examples.spark_pipeline"]
