# SepLab: `make run` sets everything up and serves the demo; `make test` sets up and runs the suite.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000
# Development mode is explicit: the settings default to production-safe (DEBUG off).
run test: export DEBUG ?= 1

.PHONY: help setup run test lint browser cluster-tools cluster clean

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

test: setup browser cluster-tools  ## Run the whole test suite (installs Chromium, nginx and PgBouncer for its tests when missing)
	$(PY) -m pytest $(PYTEST_ARGS)

lint: setup  ## ruff
	$(VENV)/bin/ruff check .

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

cluster: setup cluster-tools  ## Two app servers behind nginx, PgBouncer, Redis, two workers: 1,000 raters at a person's pace (bench/cluster.py)
	$(PY) bench/cluster.py $(CLUSTER_ARGS)

clean:  ## Remove the virtualenv and local databases
	rm -rf $(VENV) db.sqlite3 .test-db*.sqlite3*
