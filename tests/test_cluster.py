"""Past one machine, proven: the two-server deployment of bench/cluster.py -- two gunicorn app servers
behind nginx, PostgreSQL behind PgBouncer in transaction pooling, Redis for the shared limits, two run_worker
processes -- with raters working through the entry point while one app server and one worker (caught running a
job) are killed with SIGKILL and started again. Every acknowledged judgment is stored exactly once, every queued
job finishes exactly once (the one whose worker was killed is failed by the heartbeat sweep and started again, as
its page offers), nginx sends what the dead server never answered to the other one so raters see no error, and a
crowd link's launch limit holds across both servers (Redis), not per server.

It runs in make test's PostgreSQL pass (.ci/run), the database PgBouncer pools; the 1,000-rater bench is
`make cluster` (bench/README.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="the deployment runs PostgreSQL behind PgBouncer: it is tested in make test's PostgreSQL pass (.ci/run)",
)


@pytest.mark.slow(seconds=50)
def test_two_servers_and_two_workers_survive_kill_9_with_nothing_lost_or_done_twice():
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL")}
    run = subprocess.run(
        [
            sys.executable,
            "bench/cluster.py",
            "--raters",
            "20",
            "--seconds",
            "24",
            "--think",
            "0.3,1",
            "--kill",
            "--jobs",
            "6",
            "--web-workers",
            "1",
            "--web-threads",
            "8",
            "--json",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lines = run.stdout.splitlines()
    figures = json.loads(next(line for line in lines if line.startswith("{")))
    events = [line for line in lines if line.startswith("event:")]
    # the faults happened while raters worked: the app server and a worker that was running a job
    assert any("kill -9 app server 0" in e for e in events)
    killed = next(e for e in events if "kill -9 a worker running a job" in e)
    assert killed.rsplit("-> ", 1)[1] in ("0", "1"), events
    # judgments: many acknowledged, each stored exactly once; nothing refused while a server was down
    assert figures["acknowledged"] > 100 and figures["acknowledged"] == figures["stored"]
    assert figures["lost"] == 0 and figures["duplicated"] == 0
    assert figures["errors"] == 0, figures["error_kinds"]
    # jobs: all done, each task run to success once by one worker; the killed one was started again
    assert figures["jobs"] == figures["done"] == figures["succeeded_once"] == 6
    assert figures["claimed_twice"] == 0 and figures["restarted_after_kill"] >= 1
    # the crowd link's launch limit of 6 a minute holds across both servers: 6 of 10 new workers, not 10
    assert figures["launch"] == {"limit": 6, "arrivals": 10, "admitted": 6, "refused": 4, "other": 0}
    assert figures["worker_seen"]["missing"] is False
