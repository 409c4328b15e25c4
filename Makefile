# Two commands do everything on a fresh machine (Python 3.11, Java 17, Node 20):
#   make run    set up .venv, start a nameserver + broker on ./data, run a produce/consume demo
#   make test   set up .venv (all extras) and the npm interop client, run the whole suite

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
INTEROP := tests/interop

.PHONY: run test venv interop-deps lint typecheck bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[dev,spark]'
	touch $@

venv: $(VENV)/.installed

$(INTEROP)/node_modules/.installed: $(INTEROP)/package.json
	cd $(INTEROP) && npm install --no-audit --no-fund --loglevel=error
	touch $@

interop-deps: $(INTEROP)/node_modules/.installed

run: venv
	$(PY) -m examples.quickstart --data-dir ./data

test: venv interop-deps
	$(VENV)/bin/pytest -q -p no:cacheprovider

lint: venv
	$(VENV)/bin/ruff check aiorocketmq/__init__.py aiorocketmq/logs.py protocol server client spark_sink bench tests examples

typecheck: venv
	$(VENV)/bin/mypy aiorocketmq examples

bench: venv
	$(PY) -m aiorocketmq.bench.codec_bench
	$(PY) -m aiorocketmq.bench.channel_bench
	$(PY) -m aiorocketmq.bench.mqbench all --embedded

clean:
	rm -rf $(VENV) $(INTEROP)/node_modules data
