# SepLab: `make run` sets everything up and serves the demo; `make test` sets up and runs the suite.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000
# Development mode is explicit: the settings default to production-safe (DEBUG off).
run test: export DEBUG ?= 1

.PHONY: help setup run test test-fast lint browser cluster-tools redis cluster clean

help:  ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -r requirements.txt
	touch $@

setup: $(VENV)/.installed  ## Create .venv and install requirements.txt

run: setup  ## Migrate, load the demo, start the background worker (restarted if it stops) and serve http://$(HOST):$(PORT) (SQLite by default)
	$(PY) manage.py migrate --noinput
	$(PY) manage.py load_demo --base-url http://$(HOST):$(PORT)
	( while true; do $(PY) manage.py run_worker && break; echo "The background worker stopped; starting it again."; sleep 1; done ) & \
	worker=$$!; trap 'pkill -P $$worker 2>/dev/null; kill $$worker 2>/dev/null' EXIT INT TERM; \
	$(PY) manage.py runserver $(HOST):$(PORT)

# Parallel test workers (pytest-xdist, a database of its own each). Three on this 2-core machine: a third of the
# suite waits on other processes (Chromium, gunicorn, workers, PostgreSQL) rather than computing.
TEST_WORKERS ?= 3
# --dist load --maxschedchunk 2: two tests at a time, in the collection's order (the slow tests first,
# tests/conftest.py), to whichever worker is free. Not loadscope (a module per worker): it keys the tests by node id,
# and schemathesis gives each operation's test the same one, so all but one would never run.
PYTEST_PARALLEL = -n $(TEST_WORKERS) --dist load --maxschedchunk 2 --durations 15

test: setup browser cluster-tools redis  ## Run the whole test suite in parallel and print the 15 slowest tests (installs Chromium, nginx, PgBouncer and Redis for its tests when missing)
	@# the numba loops compiled into their cache once, not by each worker
	DEBUG=1 $(PY) -c "from analytics.core import ratings; ratings.compile_loops()"
	$(PY) -m pytest $(PYTEST_PARALLEL) $(PYTEST_ARGS)

test-fast: setup  ## The edit loop: the suite without the browser, slow and own-database tests (make test runs them all)
	$(PY) -m pytest $(PYTEST_PARALLEL) -m "not browser and not slow and not own_database" $(PYTEST_ARGS)

lint: setup  ## ruff (lint and format) and mypy (the whole project; strict on the numerical core)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

browser:  ## Install Debian's Chromium for the browser tests when it is missing (needs root; or set CHROMIUM=path)
	@if [ -n "$$CHROMIUM" ] || command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then \
	  true; \
	elif [ "$$(id -u)" = 0 ]; then \
	  echo "Installing Debian's chromium for the browser tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else \
	  echo "No Chromium: run 'sudo make browser' (apt-get install chromium) or set CHROMIUM=/path/to/chromium;" \
	       "the browser tests fail without one."; \
	fi

cluster-tools:  ## Install Debian's nginx and PgBouncer for the two-server deployment (bench/cluster.py) when missing (needs root)
	@if command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; then nginx=1; fi; \
	if command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ]; then pgb=1; fi; \
	if [ -n "$$nginx" ] && [ -n "$$pgb" ]; then \
	  true; \
	elif [ "$$(id -u)" = 0 ]; then \
	  echo "Installing Debian's nginx and pgbouncer for the deployment test"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light pgbouncer >/dev/null; \
	else \
	  echo "No nginx or pgbouncer: run 'sudo make cluster-tools'; the deployment test fails without them."; \
	fi

redis:  ## Start a Redis server on 127.0.0.1:6379 for the tests when none answers (installs Debian's redis-server when missing; needs root)
	@if $(PYTHON) -c "import socket; socket.create_connection(('127.0.0.1', 6379), 1)" 2>/dev/null; then \
	  true; \
	elif command -v redis-server >/dev/null 2>&1 || [ "$$(id -u)" = 0 ]; then \
	  command -v redis-server >/dev/null 2>&1 || { echo "Installing Debian's redis-server for the tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; }; \
	  echo "Starting redis-server on 127.0.0.1:6379 for the tests (it keeps nothing on disk)"; \
	  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
	    --logfile "$${TMPDIR:-/tmp}/seplab-redis.log"; \
	else \
	  echo "No Redis on 127.0.0.1:6379: run 'sudo make redis' or start one; the shared rate-limit test fails without it."; \
	fi

cluster: setup cluster-tools  ## Two app servers behind nginx, PgBouncer, Redis, two workers: 1,000 raters at a person's pace (bench/cluster.py)
	$(PY) bench/cluster.py $(CLUSTER_ARGS)

clean:  ## Remove the virtualenv and local databases
	rm -rf $(VENV) db.sqlite3 .test-db*.sqlite3*
