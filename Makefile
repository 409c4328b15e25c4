# Two commands do everything on a fresh machine (Python 3.11, Java 17, Node 20):
#   make run    set up .venv (the package, no extras), start a nameserver + broker on ./data,
#               run a produce/consume demo
#   make test   set up .venv (all extras) and the npm interop client, run the whole suite

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
INTEROP := tests/interop

.PHONY: run test venv interop-deps java-deps java-tools browser-deps lint typecheck bench clean

# The package alone: all `make run` needs (no pyspark, aiohttp or dev tools to download).
$(VENV)/.base: pyproject.toml setup.py $(wildcard protocol/_*.[ch] spark_sink/_*.c server/store/_*.c)
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e .
	touch $@

# Every extra on top: dev (pytest, ruff, mypy, ...), spark and dashboard.
$(VENV)/.installed: $(VENV)/.base
	$(PIP) install -q -e '.[dev,spark,dashboard]'
	touch $@

venv: $(VENV)/.installed

$(INTEROP)/node_modules/.installed: $(INTEROP)/package.json
	cd $(INTEROP) && npm install --no-audit --no-fund --loglevel=error
	touch $@

interop-deps: $(INTEROP)/node_modules/.installed

# Stock Apache RocketMQ 4.9.7 (Maven Central) + our driver, for tests/interop/test_stock_*.py:
# target/classes and target/classpath.txt; the stamp makes a second run instant.
JAVA_DIR := $(INTEROP)/java
$(JAVA_DIR)/target/.built: $(JAVA_DIR)/pom.xml $(wildcard $(JAVA_DIR)/src/main/java/io/aiorocketmq/interop/*.java) | java-tools
	mvn -q -B -Dstyle.color=never -f $(JAVA_DIR)/pom.xml -DskipTests package dependency:build-classpath -Dmdep.outputFile=$(CURDIR)/$(JAVA_DIR)/target/classpath.txt
	touch $@

java-tools:
	@command -v java >/dev/null || { echo "java-deps: 'java' (JDK 17) is not on PATH; install it to build the stock RocketMQ harness" >&2; exit 1; }
	@command -v mvn >/dev/null || { echo "java-deps: 'mvn' (Maven 3) is not on PATH; install it to build the stock RocketMQ harness" >&2; exit 1; }

# Stock Apache RocketMQ 5.3.3 + its producer driver, a pom of its own (the 4.9.7 classpath above
# stays as it is), for the timer-message comparison in tests/interop/test_stock_timer.py.
JAVA5_DIR := $(INTEROP)/java5
$(JAVA5_DIR)/target/.built: $(JAVA5_DIR)/pom.xml $(wildcard $(JAVA5_DIR)/src/main/java/io/aiorocketmq/interop5/*.java) | java-tools
	mvn -q -B -Dstyle.color=never -f $(JAVA5_DIR)/pom.xml -DskipTests package dependency:build-classpath -Dmdep.outputFile=$(CURDIR)/$(JAVA5_DIR)/target/classpath.txt
	touch $@

java-deps: $(JAVA_DIR)/target/.built $(JAVA5_DIR)/target/.built

# Debian's chromium for tests/browser (driven by Playwright with executable_path; never
# `playwright install`, which downloads its own browser).
browser-deps:
	command -v chromium >/dev/null || (apt-get update && apt-get install -y --no-install-recommends chromium)

run: $(VENV)/.base
	$(PY) -m examples.quickstart --data-dir ./data

# The whole suite, then the in-process tests again on the pure-Python paths
# (AIOROCKETMQ_NO_EXTENSIONS=1: the built C modules left unused; lint does not change).
# Two pytest-xdist workers, a test module per worker at a time (--dist loadscope, so a module's
# stock cluster or Spark session is started once): most integration and stock-peer tests wait
# on processes, timeouts and failovers, so two of them share two cores well.
# `make test TEST_WORKERS=0` runs everything in one process.
TEST_WORKERS ?= 2
PYTEST := $(VENV)/bin/pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadscope
test: venv interop-deps java-deps browser-deps
	$(PYTEST)
	AIOROCKETMQ_NO_EXTENSIONS=1 $(PYTEST) tests/unit --ignore=tests/unit/test_sourcecode.py

lint: venv
	$(VENV)/bin/ruff check setup.py aiorocketmq/__init__.py aiorocketmq/logs.py protocol server client spark_sink bench tests examples

typecheck: venv
	$(VENV)/bin/mypy aiorocketmq examples

bench: venv
	$(PY) -m aiorocketmq.bench.codec_bench
	$(PY) -m aiorocketmq.bench.channel_bench
	$(PY) -m aiorocketmq.bench.mqbench all --embedded

clean:
	rm -rf $(VENV) $(INTEROP)/node_modules data
